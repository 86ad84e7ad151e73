//! The GPU bundle's probe: reads GPU memory with the kernel's own code (`measure::gpu`,
//! `Meter::watch_gpus`) and classifies error messages with `dryml`'s out-of-memory test, so
//! `tests/gpu/check.py` can hold them against PyTorch and `nvidia-smi` on a machine with a GPU.
//! Every answer is one JSON line on stdout.

use clap::{Parser, Subcommand};
use dryml_kernel::measure::gpu::Gpu;
use dryml_kernel::measure::meter::Meter;
use serde_json::{json, Value};
use std::io::BufRead;
use std::time::Duration;

#[derive(Parser)]
#[command(name = "dryml-gpu-probe", about = "GPU memory as the DRYML Rust kernel reads it")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// The GPUs this process's CUDA sees (PCI bus order, after CUDA_VISIBLE_DEVICES) and their
    /// memory, counting only --pids (none: 0), as an experiment's reading does.
    Sample {
        #[arg(long, value_delimiter = ',')]
        pids: Vec<u32>,
    },
    /// The highest GPU memory of --root and its descendants over --secs, read every 20 ms by
    /// the watch the kernel runs while a cell runs.
    Watch {
        #[arg(long)]
        root: u32,
        #[arg(long)]
        secs: f64,
    },
    /// Writes the machine the kernel's resource pool hands out (its CPUs and the GPUs NVML
    /// shows, named to CUDA by UUID) into --state-dir, as the kernel does at its start.
    Machine {
        #[arg(long)]
        state_dir: std::path::PathBuf,
    },
    /// Reads one JSON string per line on stdin (an error message) and says, for each, whether
    /// the batching loops treat it as out of memory.
    Classify,
}

fn gpus_json(gpus: &[Gpu], used: &[u64], free: &[u64], total: &[u64]) -> Vec<Value> {
    gpus.iter()
        .enumerate()
        .map(|(i, g)| {
            json!({"label": g.label, "name": g.name, "bus_id": g.bus_id, "uuid": g.uuid,
                   "used_by_us": used.get(i), "free": free.get(i), "total": total.get(i)})
        })
        .collect()
}

fn main() {
    let cli = Cli::parse();
    let mut meter = Meter::default();
    let out = match cli.cmd {
        Cmd::Sample { pids } => {
            let gpus = meter.visible_gpus(std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref());
            let s = meter.sample(&pids, &gpus, false);
            let pick = |f: fn(&dryml_kernel::measure::gpu::GpuMem) -> u64| s.gpus.iter().map(f).collect::<Vec<_>>();
            json!({
                "gpus": gpus_json(&gpus, &pick(|m| m.used_by_us), &pick(|m| m.free), &pick(|m| m.total)),
                "note": meter.gpu_note(),
                "pid_view": format!("{:?}", dryml_kernel::measure::gpu::PidView::detect()),
            })
        }
        Cmd::Watch { root, secs } => {
            let gpus = meter.visible_gpus(std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref());
            let peaks = match meter.watch_gpus(&gpus, root) {
                Some(w) => {
                    std::thread::sleep(Duration::from_secs_f64(secs.max(0.0)));
                    meter.end_watch(w)
                }
                None => vec![],
            };
            json!({"gpus": gpus.iter().map(|g| g.label.clone()).collect::<Vec<_>>(), "peaks": peaks, "note": meter.gpu_note()})
        }
        Cmd::Machine { state_dir } => {
            let gpus = meter.visible_gpus(std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref());
            let totals: Vec<u64> = meter.sample(&[], &gpus, false).gpus.iter().map(|m| m.total).collect();
            let machine = dryml_kernel::magic::context::machine(&gpus, &totals);
            match std::fs::create_dir_all(&state_dir).and_then(|()| machine.save(&state_dir)) {
                Ok(()) => json!({"machine": machine.to_record()}),
                Err(e) => json!({"error": format!("{}: {e}", state_dir.display())}),
            }
        }
        Cmd::Classify => {
            let verdicts: Vec<Value> = std::io::stdin()
                .lock()
                .lines()
                .map_while(Result::ok)
                .filter(|l| !l.trim().is_empty())
                .map(|l| {
                    let message: String = serde_json::from_str(&l).unwrap_or(l);
                    json!({"out_of_memory": dryml::batch::is_out_of_memory_message(&message), "message": message})
                })
                .collect();
            json!(verdicts)
        }
    };
    println!("{out}");
}
