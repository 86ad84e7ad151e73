//! `interact`: controls and an output area that shows a closure's result, rerun whenever a
//! control changes, as ipywidgets' `interact` does.

use super::controls::{Checkbox, Container, Dropdown, FloatSlider, IntSlider, Output, Text};
use super::model::{Model, Widget};
use std::sync::Arc;

/// A control whose value `interact` passes to its closure.
pub trait Control: Widget + Clone + Send + Sync + 'static {
    /// The value it gives.
    type Value;
    /// Its value now.
    fn current(&self) -> Self::Value;
    /// The state key the value lives under.
    const KEY: &'static str = "value";
}

macro_rules! control {
    ($t:ty, $v:ty, $key:literal, $get:expr) => {
        impl Control for $t {
            type Value = $v;
            const KEY: &'static str = $key;
            fn current(&self) -> $v {
                let get: fn(&$t) -> $v = $get;
                get(self)
            }
        }
    };
}
control!(IntSlider, i64, "value", |c| c.value());
control!(FloatSlider, f64, "value", |c| c.value());
control!(Dropdown, Option<String>, "index", |c| c.value());
control!(Text, String, "value", |c| c.value());
control!(Checkbox, bool, "value", |c| c.value());

/// One control or a tuple of up to four: what `interact` takes.
pub trait Controls: Clone + Send + Sync + 'static {
    /// The values, one per control.
    type Values;
    /// The values now.
    fn values(&self) -> Self::Values;
    /// The controls' models and the keys their values live under.
    fn parts(&self) -> Vec<(Model, &'static str)>;
}

impl<C: Control> Controls for C {
    type Values = C::Value;
    fn values(&self) -> C::Value {
        self.current()
    }
    fn parts(&self) -> Vec<(Model, &'static str)> {
        vec![(self.model().clone(), C::KEY)]
    }
}

macro_rules! tuple {
    ($($c:ident $i:tt),+) => {
        impl<$($c: Control),+> Controls for ($($c,)+) {
            type Values = ($($c::Value,)+);
            fn values(&self) -> Self::Values {
                ($(self.$i.current(),)+)
            }
            fn parts(&self) -> Vec<(Model, &'static str)> {
                vec![$((self.$i.model().clone(), $c::KEY)),+]
            }
        }
    };
}
tuple!(A 0, B 1);
tuple!(A 0, B 1, C 2);
tuple!(A 0, B 1, C 2, D 3);

/// What `interact` made: the controls above the output area, shown as one widget.
pub struct Interactive {
    column: Container,
    /// Where the closure's result shows.
    pub output: Output,
}

impl std::fmt::Debug for Interactive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Interactive({})", self.column.model().id())
    }
}

impl Widget for Interactive {
    fn model(&self) -> &Model {
        self.column.model()
    }
}

impl Interactive {
    /// How evcxr shows it as a cell's value.
    pub fn evcxr_display(&self) {
        self.column.evcxr_display()
    }

    /// Shows it as a new output of the running cell.
    pub fn show(&self) {
        self.column.show()
    }
}

/// Shows `f(values)` under `controls`, and again whenever one of them changes (on the child's
/// comm thread, so while a cell runs too). The result shows as text; a panic in `f` shows as
/// its message, and the controls go on working.
///
/// ```
/// use dryml::widgets::{interact, IntSlider};
///
/// let k = IntSlider::new(1..=10, 3).description("k");
/// let shown = interact(k.clone(), |k| format!("{k} squared is {}", k * k));
/// k.set_value(4);
/// ```
pub fn interact<C: Controls, T: std::fmt::Display>(
    controls: C,
    f: impl Fn(C::Values) -> T + Send + Sync + 'static,
) -> Interactive {
    let output = Output::new();
    let parts = controls.parts();
    let mut children: Vec<&dyn Widget> = parts.iter().map(|(m, _)| m as &dyn Widget).collect();
    children.push(&output);
    let column = Container::column(&children);
    let run = {
        let (controls, output) = (controls.clone(), output.clone());
        Arc::new(move || {
            let text = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(controls.values()).to_string()))
            {
                Ok(t) => t,
                Err(p) => format!("panicked: {}", crate::sys::panic_message(&*p).unwrap_or_default()),
            };
            output.set_text(&text);
        })
    };
    run();
    for (model, key) in parts {
        let run = run.clone();
        model.observe(key, move |_| run());
    }
    Interactive { column, output }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::widgets::model::from_frontend;
    use serde_json::json;

    #[test]
    fn a_control_moved_by_the_frontend_reruns_the_closure() {
        let k = IntSlider::new(0..=10, 2);
        let name = Dropdown::new(["relu", "tanh"]);
        let shown = interact((k.clone(), name.clone()), |(k, n)| format!("{k} {}", n.unwrap_or_default()));
        let text =
            |s: &Interactive| s.output.model().get("outputs")[0]["text"].as_str().unwrap_or_default().to_string();
        assert_eq!(text(&shown), "2 relu");
        assert!(from_frontend(k.model(), json!({"method": "update", "state": {"value": 7}, "buffer_paths": []})));
        assert_eq!(k.value(), 7);
        assert_eq!(text(&shown), "7 relu");
        assert!(from_frontend(name.model(), json!({"method": "update", "state": {"index": 1}})));
        assert_eq!(text(&shown), "7 tanh");
        // Set from Rust, the closure reruns too.
        k.set_value(1);
        assert_eq!(text(&shown), "1 tanh");

        let boom = interact(IntSlider::new(0..=1, 0), |v| if v == 0 { panic!("no zero") } else { v });
        assert_eq!(text(&boom), "panicked: no zero");
    }
}
