//! The controls of `@jupyter-widgets/controls` 2.0 a notebook uses most, typed: sliders, a
//! dropdown, text, a checkbox, a button, labels, boxes, and the output area `interact` fills.

use super::model::{reference, Model, Widget};
use serde_json::json;
use std::ops::RangeInclusive;

macro_rules! widget {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $name {
            model: Model,
        }

        impl Widget for $name {
            fn model(&self) -> &Model {
                &self.model
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.model.fmt(f)
            }
        }

        impl $name {
            /// Shows it as a new output of the running cell (a cell's value shows it too).
            pub fn show(&self) {
                self.model.show()
            }

            /// How evcxr shows it as a cell's value.
            pub fn evcxr_display(&self) {
                self.model.evcxr_display()
            }

            /// Sets the label beside it.
            pub fn description(self, text: &str) -> Self {
                self.model.set(json!({"description": text}));
                self
            }

            /// Closes it: the frontend forgets it, and its views go.
            pub fn close(&self) {
                self.model.close()
            }
        }
    };
}

widget!(
    /// A slider over whole numbers (`IntSlider`).
    ///
    /// ```
    /// let k = dryml::widgets::IntSlider::new(1..=10, 3).description("k");
    /// k.set_value(5);
    /// assert_eq!(k.value(), 5);
    /// ```
    IntSlider
);

impl IntSlider {
    /// A slider over `range`, at `value`.
    pub fn new(range: RangeInclusive<i64>, value: i64) -> Self {
        let state = json!({"value": value, "min": range.start(), "max": range.end(), "step": 1});
        IntSlider { model: Model::control("IntSlider", "IntSliderModel", "IntSliderView", state) }
    }

    /// Moves in steps of `step`.
    pub fn step(self, step: i64) -> Self {
        self.model.set(json!({"step": step}));
        self
    }

    /// Its value, as the user last set it.
    pub fn value(&self) -> i64 {
        self.model.get("value").as_i64().unwrap_or_default()
    }

    /// Moves it.
    pub fn set_value(&self, value: i64) {
        self.model.set(json!({"value": value}));
    }

    /// Calls `f` with each new value.
    pub fn on_change(&self, f: impl Fn(i64) + Send + Sync + 'static) {
        self.model.observe("value", move |v| f(v.as_i64().unwrap_or_default()));
    }
}

widget!(
    /// A slider over real numbers (`FloatSlider`).
    FloatSlider
);

impl FloatSlider {
    /// A slider over `range` in steps of `step`, at `value`.
    pub fn new(range: RangeInclusive<f64>, step: f64, value: f64) -> Self {
        let state =
            json!({"value": value, "min": range.start(), "max": range.end(), "step": step, "readout_format": ".3g"});
        FloatSlider { model: Model::control("FloatSlider", "FloatSliderModel", "FloatSliderView", state) }
    }

    /// Its value.
    pub fn value(&self) -> f64 {
        self.model.get("value").as_f64().unwrap_or_default()
    }

    /// Moves it.
    pub fn set_value(&self, value: f64) {
        self.model.set(json!({"value": value}));
    }

    /// Calls `f` with each new value.
    pub fn on_change(&self, f: impl Fn(f64) + Send + Sync + 'static) {
        self.model.observe("value", move |v| f(v.as_f64().unwrap_or_default()));
    }
}

widget!(
    /// A choice among labels (`Dropdown`).
    Dropdown
);

impl Dropdown {
    /// A dropdown of `options`, the first chosen.
    pub fn new<S: ToString>(options: impl IntoIterator<Item = S>) -> Self {
        let labels: Vec<String> = options.into_iter().map(|o| o.to_string()).collect();
        let index = if labels.is_empty() { serde_json::Value::Null } else { json!(0) };
        let state = json!({"_options_labels": labels, "index": index});
        Dropdown { model: Model::control("Dropdown", "DropdownModel", "DropdownView", state) }
    }

    /// The chosen option's index.
    pub fn index(&self) -> Option<usize> {
        self.model.get("index").as_u64().map(|i| i as usize)
    }

    /// The chosen option.
    pub fn value(&self) -> Option<String> {
        label(&self.model, &self.model.get("index"))
    }

    /// Chooses the option at `index`.
    pub fn set_index(&self, index: usize) {
        self.model.set(json!({"index": index}));
    }

    /// Calls `f` with each newly chosen option.
    pub fn on_change(&self, f: impl Fn(Option<String>) + Send + Sync + 'static) {
        let model = self.model.clone();
        self.model.observe("index", move |i| f(label(&model, i)));
    }
}

/// A dropdown's option at `index`.
fn label(model: &Model, index: &serde_json::Value) -> Option<String> {
    let i = index.as_u64()? as usize;
    model.get("_options_labels").get(i)?.as_str().map(str::to_string)
}

widget!(
    /// A line of text the user types (`Text`).
    Text
);

impl Text {
    /// A text box holding `value`.
    pub fn new(value: &str) -> Self {
        Text { model: Model::control("Text", "TextModel", "TextView", json!({"value": value})) }
    }

    /// Its text.
    pub fn value(&self) -> String {
        self.model.get("value").as_str().unwrap_or_default().to_string()
    }

    /// Replaces its text.
    pub fn set_value(&self, value: &str) {
        self.model.set(json!({"value": value}));
    }

    /// Calls `f` with the text as the user types.
    pub fn on_change(&self, f: impl Fn(String) + Send + Sync + 'static) {
        self.model.observe("value", move |v| f(v.as_str().unwrap_or_default().to_string()));
    }
}

widget!(
    /// A box to tick (`Checkbox`).
    Checkbox
);

impl Checkbox {
    /// A checkbox, ticked or not.
    pub fn new(value: bool) -> Self {
        Checkbox { model: Model::control("Checkbox", "CheckboxModel", "CheckboxView", json!({"value": value})) }
    }

    /// Whether it is ticked.
    pub fn value(&self) -> bool {
        self.model.get("value").as_bool().unwrap_or_default()
    }

    /// Ticks it or not.
    pub fn set_value(&self, value: bool) {
        self.model.set(json!({"value": value}));
    }

    /// Calls `f` with each new value.
    pub fn on_change(&self, f: impl Fn(bool) + Send + Sync + 'static) {
        self.model.observe("value", move |v| f(v.as_bool().unwrap_or_default()));
    }
}

widget!(
    /// A button (`Button`).
    Button
);

impl Button {
    /// A button saying `text`.
    pub fn new(text: &str) -> Self {
        let state = json!({"description": text, "button_style": "", "icon": ""});
        Button { model: Model::control("Button", "ButtonModel", "ButtonView", state) }
    }

    /// Calls `f` at each click, on the child's comm thread (while a cell runs too).
    pub fn on_click(&self, f: impl Fn() + Send + Sync + 'static) {
        self.model.observe("custom", move |c| {
            if c["event"] == "click" {
                f()
            }
        });
    }
}

widget!(
    /// Text, or HTML, shown as it is (`Label`, `HTML`).
    Label
);

impl Label {
    /// Plain text.
    pub fn new(text: &str) -> Self {
        Label { model: Model::control("Label", "LabelModel", "LabelView", json!({"value": text})) }
    }

    /// HTML, rendered.
    pub fn html(html: &str) -> Self {
        Label { model: Model::control("HTML", "HTMLModel", "HTMLView", json!({"value": html})) }
    }

    /// Replaces what it says.
    pub fn set_value(&self, value: &str) {
        self.model.set(json!({"value": value}));
    }
}

widget!(
    /// Widgets side by side (`HBox`) or stacked (`VBox`).
    Container
);

impl Container {
    /// `children` in a row.
    pub fn row(children: &[&dyn Widget]) -> Self {
        let state = json!({"children": children.iter().map(|c| reference(*c)).collect::<Vec<_>>()});
        Container { model: Model::control("HBox", "HBoxModel", "HBoxView", state) }
    }

    /// `children` in a column.
    pub fn column(children: &[&dyn Widget]) -> Self {
        let state = json!({"children": children.iter().map(|c| reference(*c)).collect::<Vec<_>>()});
        Container { model: Model::control("VBox", "VBoxModel", "VBoxView", state) }
    }
}

widget!(
    /// An output area whose content the notebook's code replaces (`Output`).
    Output
);

impl Output {
    /// An empty output area.
    pub fn new() -> Self {
        let state = json!({"outputs": [], "msg_id": ""});
        Output { model: Model::open("Output", "@jupyter-widgets/output", "1.0.0", "OutputModel", "OutputView", state) }
    }

    /// Shows `text`, in place of what it showed.
    pub fn set_text(&self, text: &str) {
        let out = json!({"output_type": "stream", "name": "stdout", "text": text});
        self.model.set(json!({"outputs": [out]}));
    }

    /// Shows a mime bundle (`text/html` and its `text/plain`), in place of what it showed.
    pub fn set_bundle(&self, bundle: serde_json::Value) {
        let out = json!({"output_type": "display_data", "data": bundle, "metadata": {}});
        self.model.set(json!({"outputs": [out]}));
    }

    /// Empties it.
    pub fn clear(&self) {
        self.model.set(json!({"outputs": []}));
    }
}

impl Default for Output {
    fn default() -> Self {
        Output::new()
    }
}
