//! Evaluating code in the child: the kernel's own (hidden, its stdout captured, an expression of
//! a request) and the user's cell, with its dependencies, loads, borrows, errors and ends.

use super::state::Escalation;
use super::{builds, ends, errors, lockfile, output, runs_code, times, Session};
use crate::child::FLUSHER_CELL;
use crate::protocol::published::StreamName;
use crate::protocol::{ErrorContent, Io};
use dryml_builds::DEBUG_CELLS_ENV;
use evcxr::{Error as EvcxrError, EvalCallbacks};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

impl Session {
    /// Evaluates kernel-written code with its output suppressed.
    pub fn eval_hidden(&mut self, code: &str) -> Result<evcxr::EvalOutputs, ErrorContent> {
        let was_quiet = self.state.set_quiet(true);
        self.ends.drain();
        lockfile::seed_cell_crate(code);
        let mut r = self.ctx.execute(code);
        self.hooks.builds.settle();
        let end = r.as_mut().ok().and_then(ends::take_end);
        self.ends.settle(end, (r.is_ok() && runs_code(code)).then_some(Duration::from_millis(500)));
        self.state.set_quiet(was_quiet);
        // Variables that kernel-written code dropped (their types changed) are the user's to hear of.
        let dropped = self.hooks.origins.take_dropped();
        for (_, why) in dropped.iter().filter(|_| r.is_ok()) {
            self.state.stream(StreamName::Stderr, &format!("{why}\n"));
        }
        r.map_err(|e| errors::evcxr(errors::explained(e, &dropped), self.state.stderr_lines(), &[]))
    }

    /// Runs kernel-written code in the child and returns what it printed.
    pub fn capture_stdout(&mut self, code: &str) -> Result<String, ErrorContent> {
        self.state.start_capture();
        let r = self.eval_hidden(code);
        let text = self.state.take_capture();
        r.map(|_| text)
    }

    /// Evaluates one of a request's `user_expressions` to its mime bundle.
    pub fn eval_expression(&mut self, expr: &str) -> Result<Value, ErrorContent> {
        let outputs = self.eval_hidden(expr)?;
        Ok(output::mime_bundle(outputs)
            .unwrap_or_else(|| Value::Object([("text/plain".to_owned(), Value::from(""))].into_iter().collect())))
    }

    /// Which lines of the next user code are its cell's (`None`: generated code, whose compile
    /// errors keep rustc's rendering).
    pub fn set_cell_lines(&mut self, lines: Option<errors::CellLines>) {
        self.cell_lines = lines;
    }

    /// Evaluates user code, its output going to `io`; returns the `execute_result` bundle.
    pub fn eval_user(&mut self, code: &str, io: &Io) -> Result<Option<Value>, ErrorContent> {
        self.ensure_child_setup();
        self.load_config();
        self.flusher_pending |= self.state.take_startup_failed();
        let vars_before: Vec<String> = self.variables().into_keys().collect();
        // The flusher and new dependencies are compiled with the user's cell rather than as cells
        // of their own, each of which would cost a whole extra build (and for `tch`, a load)
        // before the result. evcxr's `:` commands must start the cell, so a cell with its own
        // commands gets the flusher with the next one.
        let with_flusher = self.flusher_pending && !code.lines().any(|l| l.trim_start().starts_with(':'));
        let deps = self.deps_for(code);
        if deps.as_ref().map_or(self.frameworks.torch, |d| d.1.torch) {
            self.provenance.torch_in();
        }
        // libtorch (0.2 s to load) loads into the child while the cell that brings it builds.
        if let (Some((_, want)), false, Some(dir)) = (&deps, self.frameworks.torch, crate::torch::available()) {
            if want.torch && !self.comms.preload(&dir.join("libtorch_cpu.so")) {
                tracing::debug!("libtorch could not be loaded ahead: the cell loads it");
            }
        }
        self.provenance.look_at_git(format!("/proc/{}/cwd", self.child_pid()).into());
        let notice = deps.as_ref().and_then(|(_, want)| self.rebuild_notice(*want));
        let (tables, tables_before) = self.tables_for(code, deps.is_some());
        let mut full = String::new();
        if let Some((lines, _)) = &deps {
            full.push_str(lines);
            full.push('\n');
        }
        if with_flusher {
            full.push_str(FLUSHER_CELL);
            full.push('\n');
        }
        let prefix_lines = full.matches('\n').count();
        full.push_str(code);
        let code = full;
        // While the debugger is attached, the cell crate is built with debug info (the rustc
        // wrapper's hook, the cell crate only), and the hook hears where the cell's lines went.
        self.user_opt |= code.lines().any(|l| l.trim_start().starts_with(":opt"));
        let debugging = self.state.debugging();
        let builds = builds::debug_builds(debugging, self.user_opt);
        if builds != self.debug_builds {
            self.ctx.eval_context_mut().set_build_env(DEBUG_CELLS_ENV, builds);
            self.debug_builds = builds;
        }
        let hook = if debugging { self.state.debug_hook() } else { None };
        let in_cell = self.cell_lines;
        let (cell_state, provenance) = (self.state.clone(), self.provenance.clone());
        let before_run = |lib: &std::path::Path, lines: &[usize]| {
            provenance.write(std::env::var_os("EVCXR_TMPDIR").as_deref().map(Path::new));
            // evcxr's user lines count the lines put in front; the cell's count its magics.
            let at = errors::Locations::new(lines, prefix_lines, in_cell);
            if let Some(hook) = hook {
                hook.built(lib, &at.cell_of);
            }
            cell_state.built_at(at);
        };
        self.ends.drain();
        if self.state.begin_cell() {
            self.state.end_cell();
            return Err(errors::interrupted(false, &[]));
        }
        if let Some(n) = &notice {
            self.state.stream(StreamName::Stderr, n);
        }
        self.took = None;
        let (input_io, state) = (io.clone(), self.state.clone());
        let mut callbacks = EvalCallbacks {
            input_reader: &move |req| -> String {
                state.awaiting_input(true);
                let line = input_io.input(&req.prompt, req.is_password).unwrap_or_default();
                state.awaiting_input(false);
                line
            },
            before_run: Some(&before_run),
        };
        lockfile::seed_cell_crate(&code);
        self.hooks.origins.set_cell(&code);
        let began = std::time::Instant::now();
        let mut result = self.ctx.execute_with_callbacks(&code, &mut callbacks);
        let spent = began.elapsed();
        let end = result.as_mut().ok().and_then(ends::take_end);
        // The cell's own code said why it dropped any variable, before its output; a failed
        // cell's errors say it.
        let dropped = self.hooks.origins.take_dropped();
        if let (true, Some(hook)) = (debugging, self.state.debug_hook()) {
            hook.ended();
        }
        let ended = self.state.end_cell();
        self.clean_killed_build();
        // Once the cell has ended: an interrupt's escalation waits for no build's bookkeeping.
        self.hooks.builds.settle();
        let ran = matches!(result, Ok(_) | Err(EvcxrError::TypeRedefinedVariablesLost(_)));
        if ran && with_flusher {
            self.flusher_pending = false;
        }
        if let (true, Some((_, frameworks))) = (ran, deps) {
            self.note_deps_added(frameworks, tables);
        } else if let (false, Some(before)) = (ran, tables_before) {
            // That cell did not build: its crates may not be there.
            self.set_tables(before);
        }
        self.ends.settle(end, (ran && runs_code(&code)).then_some(Duration::from_secs(2)));
        if ended >= Escalation::Interrupted {
            let killed = ended == Escalation::Killed;
            // Code that stopped on the interrupt may say what it did (a Slurm job cancelled).
            let said = self.state.take_raised().filter(|(ename, _)| ename == "KeyboardInterrupt");
            if let (false, Some((ename, evalue))) = (killed, said) {
                return Err(ErrorContent::new(&ename, evalue));
            }
            self.note_child_pid();
            return Err(errors::interrupted(killed, if killed { &vars_before } else { &[] }));
        }
        if let Some(backtrace) = self.state.take_panic() {
            return Err(errors::panic(self.state.stderr_lines(), backtrace));
        }
        if let Some((ename, evalue)) = self.state.take_raised() {
            return Err(ErrorContent::new(&ename, self.state.in_cell(&evalue)));
        }
        // The borrows it made are kept; those whose variables are gone go, saying so.
        let stored = self.variables();
        let names: Vec<&str> = stored.keys().map(String::as_str).collect();
        for gone in self.hooks.borrows.commit(result.is_ok().then_some(code.as_str()), &names) {
            self.state.stream(StreamName::Stderr, &format!("{gone}\n"));
        }
        match result {
            Ok(outputs) => {
                // evcxr's phases name where the types came from ("Types from rustc"), each try,
                // and whether cargo built the cell or rustc alone.
                let phases: Vec<_> = outputs.phases.iter().map(|p| (p.name.clone(), p.duration)).collect();
                tracing::debug!(?phases, "cell built and run");
                times::record(spent, &phases, self.hooks.builds.built_alone());
                self.took = outputs.timing;
                Ok(output::mime_bundle(outputs))
            }
            Err(e) => {
                let src = errors::Source { code: &code, added: prefix_lines, cell: self.cell_lines };
                let held = errors::moved_under_borrow(&e, src)
                    .and_then(|root| self.hooks.borrows.of_root(&root).map(|borrow| (root, borrow)));
                let mut err =
                    errors::evcxr_in(errors::explained(e, &dropped), self.state.stderr_lines(), &vars_before, src);
                if let Some((root, borrow)) = held {
                    err = errors::moved_while_borrowed(err, &root, borrow);
                }
                self.note_child_pid();
                Err(err)
            }
        }
    }
}
