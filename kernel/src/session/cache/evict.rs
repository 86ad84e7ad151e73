//! Making room: what was used least recently evicted until the cache is below its bound, and
//! `%cache clear`; what a build holds (cargo's lock) is never touched.

use super::*;

impl BuildCache {
    /// Evicts what was used least recently until the cache is below its bound. Skips what a
    /// build holds (cargo's lock, tried for `wait`) and what was used in the last hour.
    /// Returns the bytes freed.
    pub fn collect(&self, wait: Duration) -> anyhow::Result<u64> {
        let total = tree_size(&self.root).0;
        if total <= self.limit {
            return Ok(0);
        }
        let target = (self.limit as f64 * LOW_WATER) as u64;
        let mut items = Vec::new();
        for g in self.generations() {
            if g == self.dir() {
                items.extend(units(&g));
            } else {
                let (bytes, newest) = tree_size(&g);
                let used = std::fs::metadata(g.join(USED_FILE)).and_then(|m| m.modified()).ok();
                items.push(Item {
                    label: g.file_name().unwrap_or_default().to_string_lossy().into_owned(),
                    bytes,
                    // Kernels touch the file at start; the tree's times are a fallback.
                    last_used: used.unwrap_or(newest),
                    paths: vec![g.clone()],
                    generation: g,
                });
            }
        }
        items.sort_by_key(|i| i.last_used);
        let now = SystemTime::now();
        let mut left = total;
        let mut freed = 0;
        let mut locks: BTreeMap<PathBuf, Vec<File>> = BTreeMap::new();
        for item in items {
            if left <= target {
                break;
            }
            if now.duration_since(item.last_used).unwrap_or_default() < RECENT {
                break;
            }
            if !locks.contains_key(&item.generation) {
                match lock_generation(&item.generation, wait) {
                    Ok(held) => {
                        locks.insert(item.generation.clone(), held);
                    }
                    Err(e) => {
                        tracing::info!("build cache: {} skipped: {e:#}", item.label);
                        continue;
                    }
                }
            }
            for p in &item.paths {
                remove(p);
            }
            tracing::info!("build cache: evicted {} ({})", item.label, dryml_sys::units::size(item.bytes));
            left = left.saturating_sub(item.bytes);
            freed += item.bytes;
        }
        Ok(freed)
    }

    /// Removes every generation; returns the bytes freed. Waits up to `wait` for builds in other
    /// kernels to finish, then gives up with an error that says so.
    pub fn clear(&self, wait: Duration) -> anyhow::Result<u64> {
        let mut freed = 0;
        for g in self.generations() {
            let _held = lock_generation(&g, wait)?;
            let size = tree_size(&g).0;
            // Keep the lock files (held now) and the directories cargo expects; drop the rest.
            for profile in profile_dirs(&g) {
                for e in std::fs::read_dir(&profile).into_iter().flatten().flatten() {
                    if e.file_name() != ".cargo-lock" {
                        remove(&e.path());
                    }
                }
            }
            for e in std::fs::read_dir(&g).into_iter().flatten().flatten() {
                let p = e.path();
                // Running kernels' claims stay; what their crates built is gone with the rest.
                if e.file_name() != KERNELS_DIR && !profile_dirs(&g).iter().any(|d| d.starts_with(&p)) {
                    remove(&p);
                }
            }
            freed += size.saturating_sub(tree_size(&g).0);
        }
        Ok(freed)
    }
}
