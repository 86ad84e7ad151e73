//! The repo index reader on any `index.jsonl`: the repo opens, every entry it lists is inside
//! the repo, and nothing it reads is followed outside.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;
use std::sync::OnceLock;

fn repo_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        // Memory-backed where there is one: a file write per input is most of the cost.
        let shm = std::path::Path::new("/dev/shm");
        let base = if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() };
        let d = base.join(format!("dryml-fuzz-index-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        dryml::objects::Repo::create(&d).expect("a scratch repo");
        d
    })
}

fuzz_target!(|data: &[u8]| {
    let dir = repo_dir();
    std::fs::write(dir.join("index.jsonl"), data).expect("writing the index");
    let repo = dryml::objects::Repo::open(dir).expect("a repo whose index is damaged still opens");
    for e in repo.entries() {
        let id = &e.meta.id;
        assert!(!id.is_empty() && !id.contains('/') && !id.starts_with('.'), "followed id {id:?}");
        // The file is never there: loading says so, from inside the repo.
        assert!(repo.by_id(id).is_err());
    }
});
