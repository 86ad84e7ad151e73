//! A cell's measure, while the logger is on or an experiment is open: a sample before it, the
//! GPUs watched while its body runs, and a sample and the logger's line after it.

use super::logger::LoggerMode;
use super::{Experiments, Host};
use crate::measure::gpu::Gpu;
use crate::measure::meter::Sample;

/// A sample once the GPUs' readings hold still: NVML's per-process figures can trail a new CUDA
/// context, so readings are repeated every 50 ms until two agree (at most 2 s).
pub(super) fn settled(host: &mut Host<'_>, gpus: &[Gpu]) -> Sample {
    let pids = dryml_sys::procfs::with_descendants(host.child_pid());
    let mut last = host.meter.sample(&pids, gpus, false);
    if gpus.is_empty() {
        return last;
    }
    let until = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let now = host.meter.sample(&pids, gpus, false);
        let same = now.gpus.iter().map(|g| g.used_by_us).eq(last.gpus.iter().map(|g| g.used_by_us));
        last = now;
        if same {
            break;
        }
    }
    last
}

/// A measured cell: its first sample and the GPUs it watches.
pub(super) struct CellMeasure {
    before: Sample,
    gpus: Vec<Gpu>,
    spent0: std::time::Duration,
}

impl Experiments {
    /// Before a cell: while the logger is on or an experiment is open, the cell is measured.
    pub(super) fn begin_cell(&mut self, host: &mut Host<'_>) -> Option<CellMeasure> {
        let spent0 = host.meter.spent;
        host.meter.begin_cell();
        if self.logger.mode == LoggerMode::Off && self.open.is_none() {
            return None;
        }
        let gpus = host.visible_gpus();
        let before = self.checkpoint(host, &gpus);
        Some(CellMeasure { before, gpus, spent0 })
    }

    /// The GPUs to watch while the body runs: NVML has no high-water mark, so GPU peaks need
    /// reads while the cell runs. A `%experiment start` in this cell opened one after the cell
    /// began.
    pub(super) fn gpus_to_watch(&self, host: &mut Host<'_>) -> Vec<Gpu> {
        match &self.measure {
            Some(m) => m.gpus.clone(),
            None if self.open.is_some() => host.visible_gpus(),
            None => Vec::new(),
        }
    }

    /// After the body: the GPU peaks seen (unless `%env CUDA_VISIBLE_DEVICES` changed the GPUs
    /// since the experiment began), and the names it re-bound.
    pub(super) fn after_body(&mut self, host: &Host<'_>, body: &str, watched: &[Gpu], peaks: Option<Vec<u64>>) {
        if let Some(e) = &mut self.open {
            if let Some(p) = peaks.filter(|_| e.gpus() == watched) {
                e.observe_gpu_peaks(&p);
            }
            if let Err(deep) = e.note_cell(body) {
                host.warn(&format!(
                    "dryml: {deep}: the experiment cannot tell which variables this cell re-binds \
                     (those whose type changed are still found)\n"
                ));
            }
        }
    }

    /// After the cell: the second sample and the logger's line.
    pub(super) fn end_cell(&mut self, host: &mut Host<'_>, m: CellMeasure) {
        let after = self.checkpoint(host, &m.gpus);
        if self.logger.mode != LoggerMode::Off {
            let measure = host.meter.spent - m.spent0;
            let peaks = (host.meter.cell_peak_cpu, host.meter.cell_peak_gpu.clone());
            let line = self.logger.record(host.execution_count, &m.before, &after, peaks, &m.gpus, measure);
            host.show(line);
        }
    }

    /// Samples memory, restarts the high-water mark, and feeds an open experiment.
    pub(super) fn checkpoint(&mut self, host: &mut Host<'_>, gpus: &[Gpu]) -> Sample {
        let s = host.meter.sample(&dryml_sys::procfs::with_descendants(host.child_pid()), gpus, true);
        if let Some(e) = &mut self.open {
            e.observe(&s);
        }
        s
    }
}
