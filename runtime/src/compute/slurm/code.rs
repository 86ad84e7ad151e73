//! Work sent to a Slurm cluster from a cell's code: `Compute::new(&reqs).on(Slurm::new())`,
//! then `.run(input, |x| ...)`, `.submit(...)` or `.sweep(&defs, repo, |m| ...)`.
//!
//! A Rust closure cannot be pickled, and its source is not at hand at run time, but a cell is
//! a compiled library: the library is copied into the job's directory, and on the node the
//! kernel binary (`dryml-kernel job-lib`, which the batch script starts) loads it and calls the
//! closure's entry there, at the same offset in the same file. So the closure must not capture
//! (the compiler checks): what it needs comes as its input, sent as MessagePack, and its value
//! comes back the same way. The node must see the job's directory, the kernel binary and the
//! toolchain's `libstd` at the paths the notebook's machine has them (a shared filesystem).
//!
//! `%%compute --on slurm` and `%%sweep --on slurm` cells go the same way ([`ship_cell`]): the
//! kernel makes the cell's body a function of the cell that reads the variables it names as
//! its inputs.

use crate::compute::context::Requests;
use crate::compute::slurm::follow::{follow, status, Submission};
use crate::compute::slurm::job::{shell_quote, write_error, JobDir, DIR_ENV};
use crate::compute::slurm::{JobOptions, SbatchArgs};
use crate::compute::sweep::SweepReport;
use crate::compute::{Compute, ComputeError};
use crate::objects::{Object, ObjectDef};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::json;
use std::ffi::{c_void, CStr, CString};
use std::fmt;
use std::marker::PhantomData;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// glibc's `dladdr1` request for the `link_map` (`<dlfcn.h>`; the libc crate lacks it).
const RTLD_DL_LINKMAP: i32 = 2;
/// The cell's library in a job's directory.
const LIBRARY: &str = "cell.so";

/// A Slurm cluster as a place to compute, with `%slurm`'s settings (the `DRYML_SLURM_*`
/// variables) unless changed here.
#[derive(Debug, Clone, Default)]
pub struct Slurm {
    options: JobOptions,
}

impl Slurm {
    /// The cluster with `%slurm`'s settings.
    pub fn new() -> Slurm {
        Slurm::default()
    }

    /// `sbatch --partition`.
    pub fn partition(mut self, name: &str) -> Self {
        self.options.partition = Some(name.to_string());
        self
    }

    /// `sbatch --account`.
    pub fn account(mut self, name: &str) -> Self {
        self.options.account = Some(name.to_string());
        self
    }

    /// `sbatch --qos`.
    pub fn qos(mut self, name: &str) -> Self {
        self.options.qos = Some(name.to_string());
        self
    }

    /// More `sbatch` options, as on its command line (`"--nodelist=n3 --exclusive"`).
    pub fn sbatch(mut self, options: &str) -> Self {
        self.options.sbatch.extend(options.split_whitespace().map(str::to_string));
        self
    }

    /// The root of the job directories (shared with the nodes), instead of `%slurm dir=`.
    pub fn dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.options.dir = Some(dir.as_ref().display().to_string());
        self
    }
}

/// [`Compute`]'s requests, timeout and memory limit, bound for a Slurm cluster.
pub struct OnSlurm<'a> {
    compute: &'a Compute,
    slurm: Slurm,
}

impl Compute {
    /// Runs on a Slurm cluster instead of a local sandbox: the requests become `sbatch`'s
    /// `--cpus-per-task` and `--gres`, the timeout `--time`, the memory limit `--mem`.
    pub fn on(&self, slurm: Slurm) -> OnSlurm<'_> {
        OnSlurm { compute: self, slurm }
    }
}

/// A submitted job whose closure returns an `O`: follow it with [`SlurmJob::wait`], also
/// from a new kernel ([`SlurmJob::attach`]).
pub struct SlurmJob<O> {
    dir: JobDir,
    id: u64,
    value: PhantomData<fn() -> O>,
}

impl<O> fmt::Debug for SlurmJob<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Slurm job {} ({}), in {}", self.id, status(&self.dir), self.dir.path.display())
    }
}

impl<O: DeserializeOwned> SlurmJob<O> {
    /// The job `id` that this notebook (or another, under the same root) submitted from code.
    pub fn attach(id: u64) -> Result<SlurmJob<O>, ComputeError> {
        let dir =
            JobOptions::from_env().find_job(id).map_err(|m| ComputeError::Job { name: "KeyError", message: m })?;
        Ok(SlurmJob { dir: JobDir::new(dir), id, value: PhantomData })
    }

    /// The job's Slurm id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The job's directory: its batch script, output, input and value.
    pub fn dir(&self) -> &Path {
        &self.dir.path
    }

    /// `PENDING (Resources)`, `RUNNING on n3`, `COMPLETED`, or the error its end maps to.
    pub fn status(&self) -> String {
        status(&self.dir)
    }

    /// Cancels the job (`scancel`).
    pub fn cancel(&self) -> Result<(), ComputeError> {
        crate::compute::slurm::cancel(self.id).map_err(slurm_error)
    }

    /// Follows the job to its end (its state in place, its output as it is written; an
    /// interrupt cancels it) and returns the closure's value.
    pub fn wait(self) -> Result<O, ComputeError> {
        let mut finished = follow(&self.dir, self.id, 0)?;
        finished.result.take("value")
    }
}

impl OnSlurm<'_> {
    /// Runs `f(input)` as a Slurm job and returns its value. `f` must not capture: pass what it
    /// needs as `input`.
    pub fn run<I, O, F>(&self, input: I, f: F) -> Result<O, ComputeError>
    where
        I: Serialize + DeserializeOwned,
        O: Serialize + DeserializeOwned,
        F: Fn(I) -> O,
    {
        self.submit(input, f)?.wait()
    }

    /// Submits `f(input)` as a Slurm job and returns at once.
    pub fn submit<I, O, F>(&self, input: I, f: F) -> Result<SlurmJob<O>, ComputeError>
    where
        I: Serialize + DeserializeOwned,
        O: Serialize + DeserializeOwned,
        F: Fn(I) -> O,
    {
        travels(f);
        let entry = closure_entry::<I, O, F> as extern "C" fn() as usize;
        let what = format!("fn({}) -> {}", std::any::type_name::<I>(), std::any::type_name::<O>());
        let mut job = self.prepare("closure", entry, &what)?;
        job.input("input", std::any::type_name::<I>(), rmp_serde::to_vec(&input).map_err(|e| e.to_string()));
        let dir = job.dir().clone();
        let id = job.submit()?;
        Ok(SlurmJob { dir, id, value: PhantomData })
    }

    /// Trains every definition as a task of one Slurm job array, each trained object (and
    /// `f`'s metrics) added to the repo at `repo` (shared with the nodes), and follows the
    /// array to its report. A kernel that dies meanwhile loses nothing: `%jobs wait` follows
    /// the sweep later.
    pub fn sweep<T, M, F>(&self, defs: &[ObjectDef], repo: impl AsRef<Path>, f: F) -> Result<SweepReport, ComputeError>
    where
        T: Object + crate::objects::Build,
        M: Serialize,
        F: Fn(&mut T) -> M,
    {
        self.sweep_job(defs, repo.as_ref(), f, false)
    }

    /// [`OnSlurm::sweep`], returning once the array is submitted (its report has the job id).
    pub fn submit_sweep<T, M, F>(
        &self,
        defs: &[ObjectDef],
        repo: impl AsRef<Path>,
        f: F,
    ) -> Result<SweepReport, ComputeError>
    where
        T: Object + crate::objects::Build,
        M: Serialize,
        F: Fn(&mut T) -> M,
    {
        self.sweep_job(defs, repo.as_ref(), f, true)
    }

    fn sweep_job<T, M, F>(
        &self,
        defs: &[ObjectDef],
        repo: &Path,
        f: F,
        detach: bool,
    ) -> Result<SweepReport, ComputeError>
    where
        T: Object + crate::objects::Build,
        M: Serialize,
        F: Fn(&mut T) -> M,
    {
        travels(f);
        let entry = sweep_entry::<T, M, F> as extern "C" fn() as usize;
        let job = self.prepare("sweep", entry, &format!("sweep of {}", std::any::type_name::<T>()))?;
        crate::compute::slurm::array::submit(job, defs, &repo.display().to_string(), detach)
    }

    /// Writes the job's directory (see [`ship`]).
    fn prepare(&self, kind: &str, entry: usize, what: &str) -> Result<Submission, ComputeError> {
        let mut own = self.slurm.options.clone();
        own.time = self.compute.timeout_limit().map(|t| t.as_secs_f64());
        own.mem = self.compute.mem_limit_bytes();
        let request = json!({"kind": kind, "from": "code", "body": what, "inputs": [], "updates": []});
        ship(&own, self.compute.requests(), entry, request)
    }
}

/// A `%%compute --on slurm` or `%%sweep --on slurm` cell's job, from the code the kernel
/// generates: `entry` is the cell's entry function, `body_line` the line of the cell's source
/// where its body starts (the job's panics name it), `request` the kernel's part of the
/// request (the cell's own options among it, as settings).
pub fn ship_cell(entry: usize, body_line: u32, request: &str) -> Result<Submission, ComputeError> {
    let bad = |what: String| ComputeError::Failed(format!("the kernel's request for the job: {what}"));
    let mut request: serde_json::Value = serde_json::from_str(request).map_err(|e| bad(e.to_string()))?;
    let fields = request.as_object_mut().ok_or_else(|| bad("not an object".into()))?;
    let options = fields.remove("options").unwrap_or_default();
    let own = JobOptions::from_settings(|key| options[key].as_str().map(str::to_string));
    let requests = fields.get("requests").and_then(|r| r.as_str()).unwrap_or_default();
    let requests = Requests::parse(requests).map_err(|e| bad(e.message))?;
    fields.insert("body_line".into(), body_line.into());
    ship(&own, &requests, entry, request)
}

/// Writes a job's directory: the library that holds `entry` (the node calls it there), the
/// node's program, the request (`request`, with the options merged over `%slurm`'s, the
/// library and where the entry is in it) and the batch script. Nothing is left on an error.
fn ship(
    own: &JobOptions,
    requests: &Requests,
    entry: usize,
    mut request: serde_json::Value,
) -> Result<Submission, ComputeError> {
    let failed = |m: String| ComputeError::Failed(m);
    let runner = runner()?;
    let lib = library_of(entry)?;
    let settings = own.over(&JobOptions::from_env());
    let SbatchArgs { args, time, mem } = settings.sbatch_args(requests).map_err(slurm_error)?;
    let kind = request["kind"].as_str().unwrap_or_default().to_string();
    for (k, v) in [
        ("notebook", json!(crate::compute::slurm::notebook_name())),
        ("requests", json!(requests.to_text())),
        ("sbatch", json!(args)),
        ("library", json!(LIBRARY)),
        ("entry", json!(entry - lib.base)),
        ("time", json!(time.map(crate::compute::slurm::slurm_time))),
        ("mem", json!(mem)),
        ("created", json!(crate::compute::slurm::local_now())),
    ] {
        request[k] = v;
    }
    let dir = settings
        .new_job_dir()
        .map_err(|e| failed(format!("creating the job's directory in {}: {e}", settings.notebook_dir().display())))?;
    let jd = JobDir::new(&dir);
    let written = (|| -> std::io::Result<()> {
        std::fs::copy(&lib.path, jd.file(LIBRARY))?;
        let path = std::env::var("LD_LIBRARY_PATH").unwrap_or_default();
        let program = format!(
            "#!/bin/sh\n# Written by DRYML Rust: the kernel binary loads the cell's library ({LIBRARY}) and calls\n\
             # the job's entry in it. sbatch passes on the notebook process's environment, whose evcxr\n\
             # variable would make the binary evcxr's child.\n\
             export LD_LIBRARY_PATH={}\nexec env -u EVCXR_IS_RUNTIME {} job-lib\n",
            shell_quote(&path),
            shell_quote(&runner.display().to_string())
        );
        crate::sys::fs::write_atomic(&jd.file("program"), program.as_bytes(), crate::sys::fs::Durability::Fsync)?;
        std::fs::set_permissions(jd.file("program"), std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
        jd.write_request(&request)?;
        jd.write_script(kind == "sweep", &args)
    })();
    if let Err(e) = written {
        // Nothing was submitted: no record to keep.
        let _ = std::fs::remove_dir_all(&dir);
        return Err(failed(format!("writing the job's directory {}: {e}", dir.display())));
    }
    Ok(Submission::open(&dir.display().to_string()))
}

fn slurm_error(e: crate::compute::slurm::SlurmError) -> ComputeError {
    ComputeError::Job { name: "SlurmError", message: e.to_string() }
}

/// The program the node runs: this process's own binary, which must be the kernel's (evcxr's
/// child is the kernel binary re-executed).
fn runner() -> Result<PathBuf, ComputeError> {
    if crate::display::interrupt::kernel_symbol(crate::sys::protocol::symbols::INTERRUPT_FLAG).is_none() {
        return Err(ComputeError::Failed(
            "Compute::on(Slurm) sends a notebook cell's closure, and this process is not a DRYML Rust kernel's".into(),
        ));
    }
    std::env::current_exe().map_err(|e| ComputeError::Failed(format!("the kernel binary's path: {e}")))
}

/// The loaded library that holds address `entry`: its file and where it was loaded.
struct Library {
    path: PathBuf,
    base: usize,
}

fn library_of(entry: usize) -> Result<Library, ComputeError> {
    // SAFETY: Dl_info is plain data that dladdr1 fills; the link_map pointer it returns stays
    // valid while the library is loaded, and its first field is `l_addr`.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    let mut map: *mut c_void = std::ptr::null_mut();
    let found = unsafe { libc::dladdr1(entry as *const c_void, &mut info, &mut map, RTLD_DL_LINKMAP) };
    if found == 0 || map.is_null() || info.dli_fname.is_null() {
        return Err(ComputeError::Failed("the closure's library was not found among the loaded ones".into()));
    }
    let base = unsafe { *(map as *const usize) };
    let path = PathBuf::from(std::ffi::OsStr::from_bytes(unsafe { CStr::from_ptr(info.dli_fname) }.to_bytes()));
    if !path.is_file() {
        return Err(ComputeError::Failed(format!("the closure's library {} is not a file to send", path.display())));
    }
    Ok(Library { path, base })
}

/// Checks, when the cell compiles, that `f` can be called on the node: only a closure with no
/// captures (a zero-sized type) is the same value in the cell's library there.
fn travels<F>(f: F) {
    const {
        assert!(
            std::mem::size_of::<F>() == 0,
            "Compute::on(Slurm): the closure captures variables (or is a function pointer), which cannot travel to the node; pass what it needs as its input (a sweep's, with the object)"
        )
    };
    let _ = f;
}

/// A closure type's one value: it has no size (checked where the job was submitted), so any
/// value of it is the closure.
fn conjure<F>() -> F {
    assert_eq!(std::mem::size_of::<F>(), 0);
    // SAFETY: a zero-sized type has exactly one value, with no bytes to read: a read through a
    // dangling, aligned pointer is valid for it.
    unsafe { std::ptr::NonNull::<F>::dangling().as_ptr().read() }
}

/// The node's entry for [`OnSlurm::run`]: reads the input, calls the closure, sends its value.
extern "C" fn closure_entry<I, O, F>()
where
    I: DeserializeOwned,
    O: Serialize,
    F: Fn(I) -> O,
{
    // Ends the program in every case; a panic never unwinds into the caller (see `ending`).
    crate::compute::slurm::job::main(|io| {
        let input: I = io.input("input")?;
        let value = conjure::<F>()(input);
        io.update("value", &value)
    })
}

/// The node's entry for [`OnSlurm::sweep`]: trains this array task's definition.
extern "C" fn sweep_entry<T, M, F>()
where
    T: Object + crate::objects::Build,
    M: Serialize,
    F: Fn(&mut T) -> M,
{
    // A panic ends the task in its hook, recorded; it never unwinds into the caller.
    crate::compute::slurm::array::task_main::<T, M>(|t| conjure::<F>()(t))
}

/// The node's side (`dryml-kernel job-lib`, started by the job's `program`): loads the cell's
/// library from `$DRYML_JOB_DIR` and calls the entry its request names, which writes the job's
/// records. A library that does not load is recorded as the job's error.
pub fn run_library() -> Result<(), String> {
    let dir =
        JobDir::new(std::env::var_os(DIR_ENV).ok_or_else(|| format!("{DIR_ENV} is not set: job.sh starts this"))?);
    let fail = |m: String| {
        write_error(&dir, "error", &m);
        m
    };
    let req = dir.request().map_err(|e| fail(format!("reading request.json: {e}")))?;
    let (Some(lib), Some(entry)) = (req["library"].as_str(), req["entry"].as_u64()) else {
        return Err(fail("request.json names no library and entry".into()));
    };
    let path = dir.file(lib);
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|e| fail(e.to_string()))?;
    // SAFETY: loading runs no code of the cell's (Rust libraries have no initialisers of their
    // own); the entry is the address the notebook took of a function with this signature, at
    // the same offset of the same file.
    unsafe {
        let handle = libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
        if handle.is_null() {
            let why = CStr::from_ptr(libc::dlerror()).to_string_lossy().into_owned();
            return Err(fail(format!("the node could not load the cell's library: {why}")));
        }
        let mut map: *mut c_void = std::ptr::null_mut();
        if libc::dlinfo(handle, libc::RTLD_DI_LINKMAP, &mut map as *mut *mut c_void as *mut c_void) != 0
            || map.is_null()
        {
            return Err(fail("the node could not find where the cell's library was loaded".into()));
        }
        let base = *(map as *const usize);
        let f: extern "C" fn() = std::mem::transmute::<usize, extern "C" fn()>(base + entry as usize);
        f();
    }
    Ok(())
}
