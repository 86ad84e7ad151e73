//! `follow`'s unit tests.

use super::*;
use serde_json::json;

fn job(state: JobState, reason: &str) -> Job {
    Job { id: 7, state, reason: reason.into(), nodes: "n3".into(), exit_code: None }
}

fn name_and_message(r: Result<Finished, ComputeError>) -> (String, String) {
    match r {
        Err(e) => (e.name().to_string(), e.message()),
        Ok(_) => ("ok".into(), String::new()),
    }
}

#[test]
fn ends_map_to_sandbox_errors() {
    let req = json!({"time": "0-00:01:00", "mem": 64 << 20});
    let at = |s: JobState, end: Option<End>, e: Option<JobError>, tail: &str| {
        name_and_message(outcome(7, Some(&job(s, "x")), end.as_ref(), e, None, tail, &req))
    };
    assert_eq!(
        at(JobState::Timeout, None, None, ""),
        ("SandboxTimedOut".into(), "Slurm stopped job 7 at its time limit (0-00:01:00)".into())
    );
    assert_eq!(at(JobState::OutOfMemory, None, None, "").0, "SandboxOutOfMemory");
    // jobacct_gather's enforcement (no cgroups) ends the job FAILED, and says why in the output.
    let (n, m) = at(JobState::Failed, None, None, "slurmstepd-vm: error: Exceeded job memory limit\n");
    assert_eq!(
        (n.as_str(), m.as_str()),
        ("SandboxOutOfMemory", "Slurm stopped job 7 for going over its memory limit of 64.0 MiB (--mem)")
    );
    assert_eq!(
        at(JobState::Failed, None, Some(JobError::Panic("boom at src/lib.rs:9:5".into())), ""),
        ("SandboxPanicked".into(), "Slurm job 7 panicked: boom at src/lib.rs:9:5".into())
    );
    let cell = json!({"body_line": 8, "body_offset": 1, "body_lines": 3});
    let (_, m) = name_and_message(outcome(
        7,
        None,
        None,
        Some(JobError::Panic("boom at src/lib.rs:9:5".into())),
        None,
        "",
        &cell,
    ));
    assert_eq!(m, "Slurm job 7 panicked: boom at cell line 3, column 5");
    assert_eq!(at(JobState::Failed, None, Some(JobError::Error("\"bad\"".into())), "").0, "SandboxFailed");
    assert_eq!(at(JobState::Cancelled, None, None, "").0, "SlurmJobCancelled");
    assert_eq!(
        at(JobState::NodeFail, None, None, ""),
        ("SlurmNodeFail".into(), "Slurm job 7 ended because n3 failed".into())
    );
    let killed = End { exit_code: 139, signal: Some(11), terminated: false, node: "n3".into(), seconds: 1.0 };
    assert_eq!(at(JobState::Failed, Some(killed), None, "").0, "SandboxKilled");
    let exited = End { exit_code: 4, signal: None, terminated: false, node: "n3".into(), seconds: 1.0 };
    assert_eq!(at(JobState::Failed, Some(exited), None, "").0, "SandboxExited");
    assert_eq!(
        at(JobState::BootFail, None, None, ""),
        ("SlurmJobEnded".into(), "Slurm job 7 ended as BOOT_FAIL (x), without a result".into())
    );
    let (n, m) = name_and_message(outcome(7, None, None, None, None, "", &req));
    assert_eq!(
        (n.as_str(), m.as_str()),
        ("SlurmJobEnded", "Slurm job 7 is no longer known to the controller and left no end record, without a result")
    );
}
