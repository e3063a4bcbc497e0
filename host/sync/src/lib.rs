//! Poison recovery for the host's locks.
//!
//! A panic while a [`Mutex`] or [`RwLock`] is held marks it poisoned, and
//! `lock()` then returns an error forever. The host catches plugin panics at
//! the ABI boundary and keeps serving, and none of its locked state is left
//! half-updated by a panic (each critical section writes whole values), so a
//! poisoned lock is taken as it is: [`LockExt::lock_or_recover`] and
//! [`RwLockExt`] return the guard either way.
//!
//! ```
//! use std::sync::Mutex;
//! use cordis_sync::LockExt;
//!
//! let count = Mutex::new(0);
//! *count.lock_or_recover() += 1;
//! assert_eq!(*count.lock_or_recover(), 1);
//! ```

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// [`Mutex::lock`] that recovers a poisoned lock.
pub trait LockExt<T: ?Sized> {
    /// Locks, waiting as `lock` does; a poisoned lock is recovered.
    fn lock_or_recover(&self) -> MutexGuard<'_, T>;
}

impl<T: ?Sized> LockExt<T> for Mutex<T> {
    fn lock_or_recover(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// [`RwLock::read`] and [`RwLock::write`] that recover a poisoned lock.
pub trait RwLockExt<T: ?Sized> {
    /// Takes the lock shared; a poisoned lock is recovered.
    fn read_or_recover(&self) -> RwLockReadGuard<'_, T>;
    /// Takes the lock exclusively; a poisoned lock is recovered.
    fn write_or_recover(&self) -> RwLockWriteGuard<'_, T>;
}

impl<T: ?Sized> RwLockExt<T> for RwLock<T> {
    fn read_or_recover(&self) -> RwLockReadGuard<'_, T> {
        self.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_or_recover(&self) -> RwLockWriteGuard<'_, T> {
        self.write().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_still_serves_its_value() {
        let shared = std::sync::Arc::new(Mutex::new(vec![1]));
        let rw = std::sync::Arc::new(RwLock::new(1));
        let (s, r) = (shared.clone(), rw.clone());
        let _ = std::thread::spawn(move || {
            let _held = s.lock_or_recover();
            let _w = r.write_or_recover();
            panic!("poison both");
        })
        .join();
        assert!(shared.is_poisoned() && rw.is_poisoned());
        shared.lock_or_recover().push(2);
        assert_eq!(*shared.lock_or_recover(), [1, 2]);
        *rw.write_or_recover() += 1;
        assert_eq!(*rw.read_or_recover(), 2);
    }
}
