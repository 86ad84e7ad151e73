//! The widget protocol's kernel side, driven by the messages the frontend sends.

use super::model::from_frontend;
use super::*;
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[test]
fn a_models_comm_opens_with_its_whole_state() {
    let s = IntSlider::new(0..=10, 3).description("k").step(2);
    let m = s.model();
    assert_eq!(m.comm().target(), "jupyter.widget");
    assert_eq!(m.get("_model_name"), "IntSliderModel");
    assert_eq!(m.get("_view_module"), "@jupyter-widgets/controls");
    assert_eq!(m.get("_model_module_version"), CONTROLS_VERSION);
    assert_eq!(
        (m.get("min"), m.get("max"), m.get("step"), m.get("description")),
        (json!(0), json!(10), json!(2), json!("k"))
    );
    assert_eq!(format!("{s:?}"), "IntSlider(value=3, description=\"k\", min=0, max=10)");
}

#[test]
fn the_frontends_updates_set_values_and_run_observers() {
    let t = Text::new("a");
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s2 = seen.clone();
    t.on_change(move |v| s2.lock().unwrap().push(v));
    assert!(from_frontend(t.model(), json!({"method": "update", "state": {"value": "ab"}, "buffer_paths": []})));
    assert_eq!(t.value(), "ab");
    t.set_value("abc");
    assert_eq!(*seen.lock().unwrap(), ["ab", "abc"]);
    // Unknown methods and other keys change nothing.
    assert!(from_frontend(t.model(), json!({"method": "nonsense"})));
    assert!(from_frontend(t.model(), json!({"method": "update", "state": {"placeholder": "x"}})));
    assert_eq!(seen.lock().unwrap().len(), 2);

    let c = Checkbox::new(false);
    assert!(from_frontend(c.model(), json!({"method": "update", "state": {"value": true}})));
    assert!(c.value());
    let f = FloatSlider::new(0.0..=1.0, 0.01, 0.5);
    assert!(from_frontend(f.model(), json!({"method": "update", "state": {"value": 0.25}})));
    assert_eq!(f.value(), 0.25);
    let d = Dropdown::new(["a", "b", "c"]);
    assert_eq!(d.value().as_deref(), Some("a"));
    assert!(from_frontend(d.model(), json!({"method": "update", "state": {"index": 2}})));
    assert_eq!((d.index(), d.value().as_deref()), (Some(2), Some("c")));
    assert_eq!(Dropdown::new(Vec::<String>::new()).value(), None);
}

#[test]
fn a_click_reaches_the_buttons_handler_and_a_closed_widget_hears_nothing() {
    let b = Button::new("go");
    let clicks = Arc::new(AtomicUsize::new(0));
    let c2 = clicks.clone();
    b.on_click(move || {
        c2.fetch_add(1, Ordering::SeqCst);
    });
    let click = json!({"method": "custom", "content": {"event": "click"}});
    assert!(from_frontend(b.model(), click.clone()));
    assert!(from_frontend(b.model(), json!({"method": "request_state"})));
    assert_eq!(clicks.load(Ordering::SeqCst), 1);
    b.close();
    assert!(b.model().comm().is_closed());
    assert!(!from_frontend(b.model(), click));
    assert_eq!(clicks.load(Ordering::SeqCst), 1);
}

#[test]
fn containers_name_their_children_by_model_id() {
    let (a, b) = (Label::new("a"), Label::html("<b>b</b>"));
    let row = Container::row(&[&a, &b]);
    assert_eq!(
        row.model().get("children"),
        json!([format!("IPY_MODEL_{}", a.model().id()), format!("IPY_MODEL_{}", b.model().id())])
    );
    assert_eq!(b.model().get("_model_name"), "HTMLModel");
    let o = Output::new();
    assert_eq!(o.model().get("_model_module"), "@jupyter-widgets/output");
    o.set_bundle(json!({"text/html": "<i>x</i>", "text/plain": "x"}));
    assert_eq!(o.model().get("outputs")[0]["data"]["text/plain"], "x");
    o.clear();
    assert_eq!(o.model().get("outputs"), json!([]));
}
