//! `%context`, the kernel's side of compute contexts: the machine record for the pool, the
//! notebook's context (claimed again by a restarted process) and the pool table. `%%compute`
//! is [`super::compute`]'s.

use super::Host;
use crate::measure::gpu::Gpu;
use crate::protocol::ErrorContent;
use crate::session::errors;
use dryml::__kernel::pool::{GpuInfo, Machine, Pool};
use dryml::compute::context::{Context, ContextError, Requests};
use dryml_magics::{ContextCommand, Invocation};
use serde_json::Value;
use std::path::Path;

/// The notebook's context and what the pool has.
#[derive(Default)]
pub struct Contexts {
    /// What `%context` asked for the notebook's process, claimed again when it restarts.
    reqs: Option<Requests>,
    /// The environment names the context set in the child (to drop them on `--restart`).
    env: Vec<String>,
    /// The pool's CPU and GPU counts, for errors at the token that names a missing device.
    devices: (usize, usize),
}

fn pool_error(e: impl std::fmt::Display) -> ErrorContent {
    ErrorContent::new("ResourcesUnavailableError", format!("the resource pool: {e}"))
}

impl Contexts {
    pub fn is_set(&self) -> bool {
        self.reqs.is_some()
    }

    /// The pool's CPU and GPU counts, which requests are checked against.
    pub fn devices(&self) -> (usize, usize) {
        self.devices
    }

    /// Writes the pool's machine record (CPUs and GPUs) where cells and sandboxes read it.
    /// The GPUs go to the provenance `provenance` records too.
    pub fn write_machine(
        &mut self,
        meter: &mut crate::measure::meter::Meter,
        state_dir: &Path,
        provenance: &crate::session::provenance::Recorder,
    ) {
        let gpus = meter.visible_gpus(std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref());
        let totals: Vec<u64> = meter.sample(&[], &gpus, false).gpus.iter().map(|g| g.total).collect();
        let machine = machine(&gpus, &totals);
        self.devices = (machine.cpus as usize, machine.gpus.len());
        let named: Vec<(String, u64)> = gpus.iter().zip(&totals).map(|(g, t)| (g.name.clone(), *t)).collect();
        provenance.gpus(&named, &meter.gpu_driver());
        if let Err(e) = machine.save(state_dir) {
            tracing::warn!("resource pool disabled: writing {}: {e}", state_dir.display());
        }
    }

    fn pool(state_dir: &Path) -> Result<Pool, ErrorContent> {
        Pool::open_dir(state_dir).map_err(pool_error)
    }

    /// The context the notebook's process holds: the one `%context` put in its environment.
    fn notebook_context(host: &Host<'_>) -> Option<Context> {
        Context::decode(&host.session.child_env(dryml::compute::context::CONTEXT_ENV)?).ok()
    }

    /// Claims `reqs` for the child and applies them: environment and CPU affinity.
    fn claim(&mut self, host: &mut Host<'_>, reqs: &Requests) -> Result<Context, ErrorContent> {
        let pid = host.session.note_child_pid();
        let mut pool = Self::pool(host.state_dir)?;
        pool.release(pid);
        let ctx = pool.allocate(reqs).map_err(|e| ErrorContent::new("ResourcesUnavailableError", e))?;
        pool.claim(pid, "notebook", &ctx).map_err(pool_error)?;
        let machine = pool.machine.clone();
        pool.commit().map_err(pool_error)?;
        let old = std::mem::take(&mut self.env);
        host.session.forget_env(&old);
        let vars: Vec<(String, Option<String>)> = ctx.env(&machine).into_iter().map(|(k, v)| (k, Some(v))).collect();
        self.env = vars.iter().map(|(k, _)| k.clone()).collect();
        host.session.set_env(vars)?;
        pin(pid, &ctx);
        Ok(ctx)
    }

    /// A new process (after a crash or restart) claims the notebook's context again; if it
    /// cannot, the context is dropped and the user told.
    pub fn reclaim(&mut self, host: &mut Host<'_>) {
        let Some(reqs) = self.reqs.clone() else { return };
        if let Err(e) = self.claim(host, &reqs) {
            self.reqs = None;
            let names = std::mem::take(&mut self.env);
            let _ = host.session.set_env(names.into_iter().map(|n| (n, None)).collect());
            host.warn(&format!("dryml: the restarted process has no context: {}\n", e.evalue));
        }
    }

    pub fn run(&mut self, host: &mut Host<'_>, inv: &Invocation, cmd: &ContextCommand) -> Result<(), ErrorContent> {
        if let ContextCommand::Set { requests: r, .. } | ContextCommand::Check(r) = cmd {
            inv.check_devices(r, self.devices.0, self.devices.1).map_err(|e| super::error(&e))?;
        }
        let current = Self::notebook_context(host);
        match cmd {
            ContextCommand::Show => {
                let pool = Self::pool(host.state_dir)?;
                // The pool's GPUs are the kernel's visible ones, in the same order.
                let gpus = host.meter.visible_gpus(std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref());
                let memory = Memory { sample: host.meter.sample(&[], &gpus, false), note: host.meter.gpu_note() };
                host.show(pool_table(&pool, host.child_pid(), current.as_ref(), Some(&memory)));
                Ok(())
            }
            ContextCommand::Check(reqs) => {
                let ctx = current.ok_or_else(|| errors::context(ContextError::NoContext))?;
                match ctx.unmet(reqs) {
                    None => {
                        host.print(&format!("The context ({ctx}) satisfies {reqs}\n"));
                        Ok(())
                    }
                    Some(why) => Err(errors::context(ContextError::Incompatible {
                        requirements: reqs.to_string(),
                        context: ctx.to_string(),
                        why,
                    })),
                }
            }
            ContextCommand::Set { requests, restart } => self.set(host, current, requests, *restart),
        }
    }

    fn set(
        &mut self,
        host: &mut Host<'_>,
        current: Option<Context>,
        requests: &Requests,
        restart: bool,
    ) -> Result<(), ErrorContent> {
        if let (Some(ctx), false) = (&current, restart) {
            return Err(errors::context(ContextError::AlreadyActive { context: ctx.to_string() }));
        }
        if restart {
            let vars: Vec<String> = host.session.variables().into_keys().collect();
            let lost = if vars.is_empty() { "none".to_string() } else { vars.join(", ") };
            host.warn(&format!(
                "Warning: restarting the notebook's process for the new context; its variables are lost ({lost}).\n"
            ));
            // Frees the old context: its claims die with the process.
            self.reqs = None;
            host.session.eval_hidden(":restart")?;
            host.session.ensure_child_setup();
            host.session.take_replaced();
        }
        let ctx = self.claim(host, requests)?;
        self.reqs = Some(requests.clone());
        let machine = Self::pool(host.state_dir)?.machine.clone();
        let env: Vec<String> = ctx.env(&machine).into_iter().map(|(k, v)| format!("{k}={v}")).collect();
        let pin = ctx.cpu_set();
        host.print(&format!(
            "Context set for the notebook's process (pid {}): {ctx}\nApplied: {}; CPU affinity: {}\n\
             Enforced: the GPUs CUDA can see and the CPUs the process may run on. Advisory: GPU memory shares \
             (read them with dryml::compute::context::current()), and thread counts for libraries started before now.\n",
            host.child_pid(),
            env.join(" "),
            if pin.is_empty() { "unchanged".to_string() } else { format!("{pin:?}") }
        ));
        Ok(())
    }
}

/// The pool's devices: the CPUs sysinfo counts and the GPUs NVML shows the kernel (PCI bus
/// order, after the kernel's own `CUDA_VISIBLE_DEVICES`), named to CUDA by UUID.
pub fn machine(gpus: &[Gpu], totals: &[u64]) -> Machine {
    let cpus = sysinfo::System::new_with_specifics(
        sysinfo::RefreshKind::nothing().with_cpu(sysinfo::CpuRefreshKind::nothing()),
    )
    .map(|s| s.cpus().len())
    .unwrap_or(0);
    // sysinfo reads /proc; should it fail, the scheduler's count still holds.
    let cpus = if cpus > 0 { cpus } else { std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1) } as u32;
    let gpus = gpus
        .iter()
        .enumerate()
        .map(|(i, g)| GpuInfo {
            index: i as u32,
            cuda_id: if g.uuid.is_empty() { i.to_string() } else { g.uuid.clone() },
            name: format!("{} ({})", g.name, g.bus_id),
            total_bytes: totals.get(i).copied().unwrap_or(0),
        })
        .collect();
    Machine { cpus, gpus }
}

/// The machine's memory beside the pool: free and total per device, from `/proc/meminfo` and
/// NVML (whole-device figures), and the GPU figures' note.
pub struct Memory {
    pub sample: crate::measure::meter::Sample,
    pub note: Option<String>,
}

impl Memory {
    fn of(&self, d: dryml::__kernel::pool::Device) -> String {
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        let (free, total) = match d.kind {
            dryml::__kernel::pool::Kind::Cpu => (self.sample.cpu.available, self.sample.cpu.total),
            dryml::__kernel::pool::Kind::Gpu => match self.sample.gpus.get(d.index as usize) {
                Some(m) => (m.free, m.total),
                None => return String::new(),
            },
        };
        format!("{:.1} of {:.1} GiB", gib(free), gib(total))
    }
}

/// `%context` alone: the notebook's context and every device of the pool with its holders and,
/// given `memory`, its free memory.
pub fn pool_table(pool: &Pool, notebook: u32, ctx: Option<&Context>, memory: Option<&Memory>) -> Value {
    let head = match ctx {
        Some(c) => format!("Context of the notebook's process (pid {notebook}): {c}"),
        None => format!(
            "The notebook's process (pid {notebook}) has no context: context_check fails with NoContextError; set one with %context REQS"
        ),
    };
    let mut rows: Vec<Vec<String>> = Vec::new();
    for d in pool.machine.devices() {
        let name = match d.kind {
            dryml::__kernel::pool::Kind::Cpu => "CPU".to_string(),
            dryml::__kernel::pool::Kind::Gpu => pool.machine.gpu(d.index).map(|g| g.name.clone()).unwrap_or_default(),
        };
        let held: Vec<String> = pool
            .claims
            .iter()
            .filter(|c| c.device == d)
            .map(|c| format!("{} pid {} ({} {})", c.holder, c.pid, c.framework, dryml::__kernel::pool::short(c.share)))
            .collect();
        let mut row = vec![d.to_string(), name, dryml::__kernel::pool::short(pool.free(d)), held.join(", ")];
        if let Some(m) = memory {
            row.push(m.of(d));
        }
        rows.push(row);
    }
    let mut columns = vec!["device", "name", "free", "held by"];
    if memory.is_some() {
        columns.push("memory free");
    }
    let (mut text, mut html) = crate::display_table::render(&head, &columns, &rows);
    if let Some(n) = memory.and_then(|m| m.note.as_deref()) {
        text.push_str(&format!("\n({n})"));
        html.push_str(&format!("<p><em>{}</em></p>", crate::display_table::escape(n)));
    }
    /// A claim on a device, in the figures.
    #[derive(serde::Serialize)]
    struct Claim<'a> {
        pid: u32,
        holder: &'a str,
        framework: &'a str,
        device: String,
        share: f64,
    }
    /// The pool's figures: the context, and every kernel's claims.
    #[derive(serde::Serialize)]
    struct Figures<'a> {
        context: Option<String>,
        claims: Vec<Claim<'a>>,
    }
    let claims = (pool.claims.iter())
        .map(|c| Claim {
            pid: c.pid,
            holder: &c.holder,
            framework: &c.framework,
            device: c.device.to_string(),
            share: c.share,
        })
        .collect();
    let figures = Figures { context: ctx.map(|c| c.to_string()), claims };
    crate::protocol::published::Bundle::html(text, html).with_data(&figures).value()
}

/// Pins every thread of the notebook's process to the context's CPUs.
pub fn pin(pid: u32, ctx: &Context) {
    dryml::__kernel::context::pin_threads(Some(pid), &ctx.cpu_set());
}
