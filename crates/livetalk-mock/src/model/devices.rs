//! The demo's three devices and what the model remembers of each from tool results.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Device {
    Lamp,
    Thermostat,
    DoorLock,
}

impl Device {
    /// The name the tools know the device by.
    pub(super) fn name(self) -> &'static str {
        match self {
            Device::Lamp => "living room lamp",
            Device::Thermostat => "kitchen thermostat",
            Device::DoorLock => "front door lock",
        }
    }

    /// The name that reads well in a sentence about the device's state.
    pub(super) fn spoken(self) -> &'static str {
        match self {
            Device::DoorLock => "front door",
            other => other.name(),
        }
    }

    pub(super) fn from_name(name: &str) -> Option<Self> {
        let name = name.trim().to_lowercase();
        if name.contains("lamp") || name.contains("light") {
            Some(Device::Lamp)
        } else if name.contains("thermostat") {
            Some(Device::Thermostat)
        } else if name.contains("lock") || name.contains("door") {
            Some(Device::DoorLock)
        } else {
            None
        }
    }
}

/// What is known of one device; `None` where no tool result has said.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct DeviceState {
    pub(super) status: Option<String>,
    pub(super) brightness: Option<f64>,
    pub(super) color: Option<String>,
    pub(super) temperature: Option<f64>,
}

impl DeviceState {
    pub(super) fn update(&mut self, newer: DeviceState) {
        self.status = newer.status.or(self.status.take());
        self.brightness = newer.brightness.or(self.brightness);
        self.color = newer.color.or(self.color.take());
        self.temperature = newer.temperature.or(self.temperature);
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct Memory {
    /// What "it" refers to.
    pub(super) last_device: Option<Device>,
    lamp: DeviceState,
    thermostat: DeviceState,
    door_lock: DeviceState,
}

impl Memory {
    pub(super) fn state(&self, device: Device) -> &DeviceState {
        match device {
            Device::Lamp => &self.lamp,
            Device::Thermostat => &self.thermostat,
            Device::DoorLock => &self.door_lock,
        }
    }

    pub(super) fn state_mut(&mut self, device: Device) -> &mut DeviceState {
        match device {
            Device::Lamp => &mut self.lamp,
            Device::Thermostat => &mut self.thermostat,
            Device::DoorLock => &mut self.door_lock,
        }
    }
}
