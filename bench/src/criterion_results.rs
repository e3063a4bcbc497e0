//! Reading what the criterion benches measured: every benchmark leaves its
//! raw samples in `target/criterion/<id>/new/sample.json` (iteration counts
//! and total times in nanoseconds, one pair per sample).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::stats::Summary;

/// The criterion output folder of a target folder (`target/criterion`).
pub fn default_dir(target_profile_dir: &Path) -> PathBuf {
    target_profile_dir.parent().unwrap_or(target_profile_dir).join("criterion")
}

/// The seconds per iteration of every sample of benchmark `id`
/// (`group/function/parameter`), summarised; `None` when the benchmark has
/// not run.
///
/// # Errors
/// A message when the file exists but cannot be read.
pub fn per_iteration(dir: &Path, id: &str) -> Result<Option<Summary>, String> {
    let file = dir.join(id).join("new").join("sample.json");
    let text = match std::fs::read_to_string(&file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", file.display())),
    };
    let value: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    let numbers = |key: &str| -> Vec<f64> { value[key].as_array().map(|a| a.iter().filter_map(Value::as_f64).collect()).unwrap_or_default() };
    let (iters, times) = (numbers("iters"), numbers("times"));
    if iters.len() != times.len() || iters.is_empty() {
        return Err(format!("{}: expected as many `iters` as `times`", file.display()));
    }
    let per: Vec<f64> = iters.iter().zip(&times).filter(|(i, _)| **i > 0.0).map(|(i, t)| t / i / 1e9).collect();
    Ok(Summary::of(&per))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_samples() {
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path().join("g/f/5/new");
        std::fs::create_dir_all(&at).unwrap();
        std::fs::write(at.join("sample.json"), r#"{"sampling_mode":"Linear","iters":[1.0,2.0,4.0],"times":[10.0,40.0,40.0]}"#).unwrap();
        let s = per_iteration(dir.path(), "g/f/5").unwrap().unwrap();
        assert_eq!(s.n, 3);
        assert!((s.median - 10e-9).abs() < 1e-15);
        assert!(per_iteration(dir.path(), "g/f/6").unwrap().is_none());
    }
}
