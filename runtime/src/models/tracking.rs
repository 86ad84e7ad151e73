//! The MLflow run a network's training logs to while an experiment or a sweep asks for one
//! (`dryml::track`): a sweep trial's run, when the training is a trial's; else a run of its own
//! under the experiment's, which gets the definition, the provenance and the model at the end.

use super::callbacks::{Callback, Control};
use super::training::Epoch;
use crate::objects::Object;
use crate::track::{Active, Run};

/// Where a training's epochs go.
pub(crate) enum Tracking {
    /// The sweep trial's run, which the trial ends.
    Trial(Active),
    /// A run of the training's own; ended `FAILED` when dropped before [`Tracking::finish`].
    Own(Option<Run>),
}

/// Said once per training on stderr: the training goes on without its run.
fn warn(e: &crate::track::TrackError) {
    eprintln!("dryml: {e}; the training goes on without it");
}

impl Tracking {
    /// The run `obj`'s training logs to, if a sweep trial or an experiment asked for one.
    pub(crate) fn start(obj: &dyn Object) -> Option<Tracking> {
        if let Some(a) = Active::get() {
            return Some(Tracking::Trial(a));
        }
        let ambient = crate::track::ambient()?;
        let name = format!("{} {}", obj.type_name(), obj.meta().id.get(..8).unwrap_or(&obj.meta().id));
        match ambient.start_child(&name) {
            Ok(run) => Some(Tracking::Own(Some(run))),
            Err(e) => {
                warn(&e);
                None
            }
        }
    }

    fn run(&self) -> Option<&Run> {
        match self {
            Tracking::Trial(a) => Some(a.run()),
            Tracking::Own(r) => r.as_ref(),
        }
    }

    /// After the training: a run of its own gets the definition, the provenance, the metrics and
    /// the model, and ends.
    pub(crate) fn finish(mut self, obj: &dyn Object, epochs: u64) {
        let Tracking::Own(run) = &mut self else { return };
        let Some(run) = run.take() else { return };
        let logged = run.log_object(obj, epochs).and_then(|()| run.log_model(obj)).and_then(|()| run.end());
        if let Err(e) = logged {
            warn(&e);
        }
    }
}

impl Drop for Tracking {
    fn drop(&mut self) {
        if let Tracking::Own(run) = self {
            if let Some(run) = run.take() {
                let _ = run.fail();
            }
        }
    }
}

impl Callback for Tracking {
    fn on_epoch(&mut self, epoch: &Epoch) -> Control {
        let losses: Vec<(String, f64)> = [("loss/train", epoch.train_loss), ("loss/validation", epoch.val_loss)]
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k.to_string(), v)))
            .collect();
        if let Some(Err(e)) = self.run().map(|r| r.log_metrics(&losses, epoch.epoch)) {
            warn(&e);
            if let Tracking::Own(r) = self {
                // The queue cannot be written: nothing more is tried for this training.
                std::mem::forget(r.take());
            }
        }
        Control::Continue
    }
}
