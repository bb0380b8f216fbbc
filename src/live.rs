//! A value that can be replaced while it is in use: the catalog and the playbooks, which
//! custom resources change at run time (docs/kubernetes-resources.md).
//!
//! Readers take the current version ([`Live::get`]) once per operation and keep it for the
//! whole operation, so one investigation, approval or execution sees one consistent catalog
//! even if a new one is put in meanwhile; the next operation sees the new one.

use std::sync::{Arc, RwLock};

#[derive(Debug)]
pub struct Live<T> {
    current: RwLock<Arc<T>>,
}

impl<T> Live<T> {
    pub fn new(value: T) -> Arc<Self> {
        Self::from_arc(Arc::new(value))
    }

    pub fn from_arc(value: Arc<T>) -> Arc<Self> {
        Arc::new(Self {
            current: RwLock::new(value),
        })
    }

    /// The version in force now.
    pub fn get(&self) -> Arc<T> {
        match self.current.read() {
            Ok(v) => v.clone(),
            // A writer panicked while holding the lock; the value it left is still whole
            // (the write is a pointer swap).
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Put `value` in force for every operation that starts from now on.
    pub fn set(&self, value: Arc<T>) {
        match self.current.write() {
            Ok(mut v) => *v = value,
            Err(poisoned) => *poisoned.into_inner() = value,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_keeps_its_version_while_a_new_one_is_put_in() {
        let live = Live::new(1);
        let held = live.get();
        live.set(Arc::new(2));
        assert_eq!((*held, *live.get()), (1, 2));
    }
}
