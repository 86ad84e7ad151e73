//! Slurm options, settings and `squeue`/`sacct` answers as `sbatch.rs` reads them.

use super::*;

fn reqs(text: &str) -> Requests {
    Requests::parse(text).unwrap()
}

#[test]
fn settings_read_their_variables_and_a_job_overrides_them() {
    let vars: BTreeMap<&str, &str> = [
        ("DRYML_SLURM_DIR", "/shared/jobs"),
        ("DRYML_SLURM_PARTITION", "gpu"),
        ("DRYML_SLURM_TIME", "2h"),
        ("DRYML_SLURM_MEM", "4G"),
        ("DRYML_SLURM_SHARDS_PER_GPU", "4"),
        ("DRYML_SLURM_SBATCH", "--nice=5  --exclusive"),
        ("DRYML_SLURM_QOS", " "),
    ]
    .into_iter()
    .collect();
    let s = JobOptions::from_lookup(|k| vars.get(k).map(|v| v.to_string()));
    assert_eq!(s.root(), PathBuf::from("/shared/jobs"));
    assert_eq!(
        (s.partition.as_deref(), s.qos.as_deref(), s.time, s.mem),
        (Some("gpu"), None, Some(7200.0), Some(4 << 30))
    );
    assert_eq!(s.sbatch, ["--nice=5", "--exclusive"]);
    let job = JobOptions {
        partition: Some("debug".into()),
        time: Some(90.0),
        sbatch: vec!["--nice=3".into()],
        ..JobOptions::default()
    };
    let got = job.over(&s).sbatch_args(&reqs("tf gpu/0=0.5")).unwrap();
    assert_eq!(
        got.args,
        [
            "--cpus-per-task=1",
            "--gres=shard:2",
            "--mem=4096M",
            "--time=0-00:01:30",
            "--partition=debug",
            "--nice=5",
            "--exclusive",
            "--nice=3"
        ]
    );
    assert_eq!((got.time, got.mem), (Some(Duration::from_secs(90)), Some(4 << 30)));
    // As settings and back, as the kernel hands a cell's own options to its code.
    let both = job.over(&s);
    let texts: BTreeMap<&str, String> = both.settings().into_iter().collect();
    assert_eq!(JobOptions::from_settings(|k| texts.get(k).cloned()), both);
    let half = JobOptions { time: Some(90.5), mem: Some(3 << 20), ..JobOptions::default() };
    let texts: BTreeMap<&str, String> = half.settings().into_iter().collect();
    assert_eq!(texts.len(), 2);
    assert_eq!(JobOptions::from_settings(|k| texts.get(k).cloned()), half);
    let none = JobOptions::from_lookup(|_| None);
    assert_eq!(none, JobOptions::default());
    assert!(none.root().ends_with("dryml-jobs"));
}

#[test]
fn requests_map_to_sbatch_options() {
    let opts = JobOptions {
        partition: Some("gpu".into()),
        time: Some(90.5),
        mem: Some(3 << 30),
        sbatch: vec!["--constraint=a100".into()],
        ..Default::default()
    };
    assert_eq!(
        sbatch_options(&reqs("tf num_cpus=2 num_gpus=1 torch num_cpus=1"), &opts).unwrap(),
        [
            "--cpus-per-task=3",
            "--gres=gpu:1",
            "--mem=3072M",
            "--time=0-00:01:31",
            "--partition=gpu",
            "--constraint=a100"
        ]
    );
    assert_eq!(
        sbatch_options(&reqs("tf gpu/0=0.5 torch gpu/1=0.1"), &JobOptions::default()).unwrap(),
        ["--cpus-per-task=1", "--gres=shard:3"]
    );
    let mixed = sbatch_options(&reqs("tf num_gpus=1 torch gpu/0=0.5"), &JobOptions::default()).unwrap_err();
    assert!(
        mixed.to_string().starts_with("1 whole GPU(s) and GPU shares (2 shards) cannot be asked for in one Slurm job"),
        "{mixed}"
    );
    assert_eq!(sbatch_options(&reqs("default"), &JobOptions::default()).unwrap(), ["--cpus-per-task=1"]);
    assert_eq!(
        sbatch_options(&reqs("tf cpu/0=0.5 cpu/1=0.25 gpu/1=1"), &JobOptions::default()).unwrap(),
        ["--cpus-per-task=1", "--gres=gpu:1"]
    );
    let err = sbatch_options(&reqs("tf num_gpus=-1"), &JobOptions::default()).unwrap_err();
    assert_eq!(err.to_string(), "tf num_gpus=-1 (all that are free) has no Slurm equivalent: ask for a number");
    assert_eq!(slurm_time(Duration::from_secs(2 * 86400 + 3661)), "2-01:01:01");
}

// Recorded from Debian's slurm-wlm 22.05 on a one-node test cluster.
const RUNNING: &str = "JobId=4 JobName=wrap
   UserId=root(0) GroupId=root(0) MCS_label=N/A
   Priority=4294901756 Nice=0 Account=(null) QOS=(null)
   JobState=RUNNING Reason=None Dependency=(null)
   Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0
   NodeList=vm BatchHost=vm";
const FAILED: &str = "JobId=5 JobName=wrap
   JobState=FAILED Reason=NonZeroExitCode Dependency=(null)
   Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=3:0
   ReqNodeList=(null) ExcNodeList=(null) NodeList=vm";
const CANCELLED: &str = "JobId=4 JobName=wrap
   JobState=CANCELLED Reason=None Dependency=(null)
   Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:15
   NodeList=(null)";

#[test]
fn scontrol_and_sbatch_outputs_parse() {
    let j = parse_job(RUNNING).unwrap();
    assert_eq!((j.id, &j.state, j.nodes.as_str(), j.exit_code), (4, &JobState::Running, "vm", Some((0, 0))));
    assert!(!j.state.is_final());
    let j = parse_job(FAILED).unwrap();
    assert_eq!((j.state, j.reason.as_str(), j.exit_code), (JobState::Failed, "NonZeroExitCode", Some((3, 0))));
    let j = parse_job(CANCELLED).unwrap();
    assert_eq!((j.state, j.nodes.as_str(), j.exit_code), (JobState::Cancelled, "", Some((0, 15))));
    assert!(parse_job("slurm_load_jobs error: Invalid job id specified").is_none());
    assert_eq!(JobState::parse("CANCELLED by 0"), JobState::Cancelled);
    assert_eq!(JobState::parse("OUT_OF_MEMORY"), JobState::OutOfMemory);
    assert!(JobState::parse("TIMEOUT").is_final());
    assert_eq!(parse_job_id("123\n"), Some(123));
    assert_eq!(parse_job_id("77;cluster2\n"), Some(77));
    assert_eq!(parse_job_id("sbatch: error"), None);
    assert_eq!(parse_gres("gpu:2,shard:8\n(null)\n"), (2, 8));
    assert_eq!(parse_gres("gpu:a100:4(S:0-1),shard:a100:16(S:0-1)\n"), (4, 16));
    assert_eq!(parse_gres("(null)\n"), (0, 0));
    assert_eq!(
        parse_array_tasks("0 RUNNING\n5 PENDING\nN/A PENDING\n"),
        vec![(0, JobState::Running), (5, JobState::Pending)]
    );
}
