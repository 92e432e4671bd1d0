//! Names interned as dense `u32` ids ([`Interner`]): apps, instances, channels, decision
//! sources and colour rules are stored once per load, and span records hold their ids.

use std::collections::HashMap;

/// Names interned as dense `u32` ids.
#[derive(Debug, Default, Clone)]
pub struct Interner {
    /// foldhash: names are looked up once or more per span, SipHash showed in the load time.
    map: HashMap<String, u32, foldhash::fast::RandomState>,
    names: Vec<String>,
}

impl Interner {
    /// The id of `name`, adding it if new.
    pub fn intern(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.map.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.map.insert(name.to_owned(), id);
        self.names.push(name.to_owned());
        id
    }

    /// The id of `name` if known.
    pub fn get(&self, name: &str) -> Option<u32> {
        self.map.get(name).copied()
    }

    /// The name of `id`.
    pub fn name(&self, id: u32) -> &str {
        &self.names[id as usize]
    }

    /// Number of names.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}
