//! The workbench's replay engine (issue 17), built by maturin into the Python module
//! `workbench_core`. The pure-Rust parts (no Python types) are tested by `cargo test
//! --no-default-features`; the bindings (`py*`) by `tests/test_core_*.py` (the link, receive side and
//! congestion control against worked examples of the kernel's and the RFCs' formulas and against
//! invariants, each scheduler port against its Python class run through the plug-in bridge), and
//! whole runs are pinned by the golden runs (`tests/test_golden.py`).

pub mod cc;
pub mod engine;
pub mod events;
pub mod link;
pub mod mptcp;
pub mod mt;
pub mod receiver;
pub mod record;
pub mod sched;
pub mod series;
pub mod tcp;
pub mod winmap;
pub mod workload;

#[cfg(feature = "python")]
mod py;
#[cfg(feature = "python")]
mod py_arrow;
#[cfg(feature = "python")]
mod py_cc;
#[cfg(feature = "python")]
mod py_engine;
#[cfg(feature = "python")]
mod py_sched;
