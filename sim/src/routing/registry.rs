//! Service discovery as the routing library sees it: each app's [`Endpoint`]s (instance,
//! colour, lane, address, registry factor) in a [`Registry`], and the (blue, green) instance
//! counts that count-aware weights and the one-colour rule read. An instance that stops is
//! removed ([`Registry::deregister`]): what is registered is what a router counts as present.

use std::collections::HashMap;
use std::net::SocketAddr;

use dyeline_model::{Color, LaneId};
use parking_lot::RwLock;

/// One instance of an app as service discovery lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The app (`service.name`).
    pub app: String,
    /// The instance id (`service.instance.id`).
    pub instance: String,
    /// Its colour (the cluster it runs in; `unknown` for an instance in neither, such as a
    /// gray lane's).
    pub color: Color,
    /// Its lane (`base` for a production instance; domain §7.1).
    pub lane: LaneId,
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its share among the instances of its colour, relative (usually 1). A registry entry
    /// left at a larger factor takes more than its share (domain §6.5 "instance skew").
    pub factor: u32,
}

/// Service discovery: app → its endpoints, in registration order.
#[derive(Default, Debug)]
pub struct Registry {
    apps: RwLock<HashMap<String, Vec<Endpoint>>>,
}

impl Registry {
    /// Adds (or replaces, by instance id) an endpoint.
    pub fn register(&self, e: Endpoint) {
        let mut apps = self.apps.write();
        let list = apps.entry(e.app.clone()).or_default();
        match list.iter_mut().find(|x| x.instance == e.instance) {
            Some(x) => *x = e,
            None => list.push(e),
        }
    }

    /// Removes the endpoint of `instance` of `app` (a stopped instance); true when it was
    /// registered.
    pub fn deregister(&self, app: &str, instance: &str) -> bool {
        let mut apps = self.apps.write();
        let Some(list) = apps.get_mut(app) else {
            return false;
        };
        let before = list.len();
        list.retain(|e| e.instance != instance);
        list.len() != before
    }

    /// The endpoints of `app` (empty when none).
    pub fn endpoints(&self, app: &str) -> Vec<Endpoint> {
        self.apps.read().get(app).cloned().unwrap_or_default()
    }

    /// (blue, green) instance counts of `app`.
    pub fn counts(&self, app: &str) -> (u32, u32) {
        let apps = self.apps.read();
        let list = apps.get(app).map_or(&[][..], Vec::as_slice);
        let n = |c: Color| list.iter().filter(|e| e.color == c).count() as u32;
        (n(Color::Blue), n(Color::Green))
    }
}
