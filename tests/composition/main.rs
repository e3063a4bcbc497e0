//! The composition suite: operators' files in the loader's dialect and the
//! policy a composition sets, through the real binary and the real compiled
//! plugins.

mod compositions;
mod policy;
mod verdicts;
