//! The simulated smart home (a lamp, a thermostat, a lock) and its two tools.
//!
//! The device list lives in a `watch` channel so the UI can show every change the model makes
//! the moment it happens. Bad input is never silently ignored: the model gets an error it can
//! read and correct.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value, json};
use tokio::sync::watch;

use super::{Tool, ToolError};

/// One device and its whole state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Device {
    pub name: String,
    pub kind: DeviceKind,
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub brightness: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub color: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature_celsius: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceKind {
    Light,
    Thermostat,
    Lock,
}

impl DeviceKind {
    /// The spelling of the `type` field in a device's state.
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceKind::Light => "light",
            DeviceKind::Thermostat => "thermostat",
            DeviceKind::Lock => "lock",
        }
    }

    /// Statuses this kind of device can be put in.
    pub fn statuses(self) -> &'static [&'static str] {
        match self {
            DeviceKind::Light => &["on", "off"],
            DeviceKind::Thermostat => &["idle", "heating", "cooling"],
            DeviceKind::Lock => &["locked", "unlocked"],
        }
    }
}

impl Device {
    /// The state as the tools report it: `device_name`, `type`, `status` and the settings that
    /// exist for this kind of device.
    pub fn state(&self) -> Value {
        let mut state = json!({
            "device_name": self.name,
            "type": self.kind.as_str(),
            "status": self.status,
        });
        if let Some(map) = state.as_object_mut() {
            if let Some(brightness) = self.brightness {
                map.insert("brightness".into(), json!(brightness));
            }
            if let Some(color) = &self.color {
                map.insert("color".into(), json!(color));
            }
            if let Some(temperature) = self.temperature_celsius {
                map.insert("temperature_celsius".into(), json!(temperature));
            }
        }
        state
    }
}

/// Lowest and highest thermostat target a person would plausibly ask for.
pub const TEMPERATURE_RANGE_CELSIUS: (f64, f64) = (5.0, 35.0);

/// Colour names a lamp accepts besides `#rrggbb`.
pub const COLOR_NAMES: &[&str] = &[
    "white",
    "warm white",
    "cool white",
    "daylight",
    "red",
    "crimson",
    "orange",
    "amber",
    "yellow",
    "gold",
    "green",
    "lime",
    "teal",
    "cyan",
    "turquoise",
    "blue",
    "navy",
    "indigo",
    "purple",
    "violet",
    "lavender",
    "magenta",
    "pink",
];

/// The shared, observable device list; clones share it.
#[derive(Debug, Clone)]
pub struct SmartHome {
    devices: Arc<watch::Sender<Vec<Device>>>,
}

impl Default for SmartHome {
    fn default() -> Self {
        Self::new()
    }
}

/// What a successful `set` changed.
#[derive(Debug, Clone, PartialEq)]
pub struct SetReport {
    pub device: Device,
    /// The settings that were applied (including a brightness implied by switching on).
    pub settings_updated: Map<String, Value>,
}

impl SmartHome {
    /// The three devices in their initial states.
    pub fn new() -> Self {
        let devices = vec![
            Device {
                name: "living room lamp".into(),
                kind: DeviceKind::Light,
                status: "off".into(),
                brightness: Some(0),
                color: Some("white".into()),
                temperature_celsius: None,
            },
            Device {
                name: "kitchen thermostat".into(),
                kind: DeviceKind::Thermostat,
                status: "idle".into(),
                brightness: None,
                color: None,
                temperature_celsius: Some(20.0),
            },
            Device {
                name: "front door lock".into(),
                kind: DeviceKind::Lock,
                status: "locked".into(),
                brightness: None,
                color: None,
                temperature_celsius: None,
            },
        ];
        SmartHome {
            devices: Arc::new(watch::Sender::new(devices)),
        }
    }

    pub fn snapshot(&self) -> Vec<Device> {
        self.devices.borrow().clone()
    }

    /// A receiver that sees every change the moment it is made.
    pub fn subscribe(&self) -> watch::Receiver<Vec<Device>> {
        self.devices.subscribe()
    }

    /// The device called `name` (matched loosely: case, surrounding spaces, a leading "the ").
    pub fn device(&self, name: &str) -> Result<Device, ToolError> {
        let devices = self.devices.borrow();
        find(&devices, name).map(|index| devices[index].clone())
    }

    /// Validates everything first, then applies the change and publishes it, or changes nothing.
    pub fn set(
        &self,
        name: &str,
        new_status: &str,
        setting: Option<&Setting>,
    ) -> Result<SetReport, ToolError> {
        let mut result = Err(ToolError::failed("the device update did not run"));
        self.devices
            .send_if_modified(|devices| match apply(devices, name, new_status, setting) {
                Ok((report, changed)) => {
                    result = Ok(report);
                    changed
                }
                Err(error) => {
                    result = Err(error);
                    false
                }
            });
        result
    }
}

fn normalize_name(name: &str) -> String {
    let lower = name.trim().to_lowercase();
    let words: Vec<&str> = lower.split_whitespace().collect();
    let words = match words.split_first() {
        Some((&"the", rest)) if !rest.is_empty() => rest,
        _ => &words[..],
    };
    words.join(" ")
}

fn find(devices: &[Device], name: &str) -> Result<usize, ToolError> {
    let wanted = normalize_name(name);
    devices
        .iter()
        .position(|d| normalize_name(&d.name) == wanted)
        .ok_or_else(|| {
            let known: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
            ToolError::invalid(format!(
                "no device called \"{}\"; known devices: {}",
                name.trim(),
                known.join(", ")
            ))
        })
}

fn parse_color(color: &str) -> Result<String, ToolError> {
    let normalized = color
        .trim()
        .to_lowercase()
        .replace(['-', '_'], " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if COLOR_NAMES.contains(&normalized.as_str()) {
        return Ok(normalized);
    }
    if let Some(hex) = normalized.strip_prefix('#')
        && hex.len() == 6
        && hex.chars().all(|c| c.is_ascii_hexdigit())
    {
        return Ok(normalized);
    }
    Err(ToolError::invalid(format!(
        "unknown colour \"{}\"; use #rrggbb or one of: {}",
        color.trim(),
        COLOR_NAMES.join(", ")
    )))
}

fn not_applicable(setting: &str, device: &Device, applies_to: &str) -> ToolError {
    ToolError::invalid(format!(
        "{setting} does not apply to the {} (a {}); it only applies to {applies_to}",
        device.name,
        device.kind.as_str()
    ))
}

/// Returns the report and whether anything actually changed.
fn apply(
    devices: &mut [Device],
    name: &str,
    new_status: &str,
    setting: Option<&Setting>,
) -> Result<(SetReport, bool), ToolError> {
    let index = find(devices, name)?;
    let device = &devices[index];
    let status = new_status.trim().to_lowercase();
    if !device.kind.statuses().contains(&status.as_str()) {
        return Err(ToolError::invalid(format!(
            "\"{}\" is not a valid status for the {} (a {}); use one of: {}",
            new_status.trim(),
            device.name,
            device.kind.as_str(),
            device.kind.statuses().join(", ")
        )));
    }

    let empty = Setting::default();
    let setting = setting.unwrap_or(&empty);
    let mut updated = device.clone();
    let mut settings_updated = Map::new();

    if let Some(temperature) = setting.temperature_celsius {
        if device.kind != DeviceKind::Thermostat {
            return Err(not_applicable("temperature_celsius", device, "thermostats"));
        }
        let (low, high) = TEMPERATURE_RANGE_CELSIUS;
        if !(low..=high).contains(&temperature) {
            return Err(ToolError::invalid(format!(
                "temperature_celsius {temperature} is out of range; use {low}–{high} °C"
            )));
        }
        updated.temperature_celsius = Some(temperature);
        settings_updated.insert("temperature_celsius".into(), json!(temperature));
    }
    if let Some(brightness) = setting.brightness {
        if device.kind != DeviceKind::Light {
            return Err(not_applicable("brightness", device, "lights"));
        }
        let Some(level) = u8::try_from(brightness).ok().filter(|b| *b <= 100) else {
            return Err(ToolError::invalid(format!(
                "brightness {brightness} is out of range; use 0–100"
            )));
        };
        updated.brightness = Some(level);
        settings_updated.insert("brightness".into(), json!(level));
    }
    if let Some(color) = &setting.color {
        if device.kind != DeviceKind::Light {
            return Err(not_applicable("color", device, "lights"));
        }
        let color = parse_color(color)?;
        settings_updated.insert("color".into(), json!(color));
        updated.color = Some(color);
    }

    // "Turn on the lamp" must give light, not an 'on' lamp at brightness 0.
    if updated.kind == DeviceKind::Light
        && status == "on"
        && setting.brightness.is_none()
        && updated.brightness == Some(0)
    {
        updated.brightness = Some(100);
        settings_updated.insert("brightness".into(), json!(100));
    }
    updated.status = status;

    let changed = updated != devices[index];
    devices[index] = updated.clone();
    Ok((
        SetReport {
            device: updated,
            settings_updated,
        },
        changed,
    ))
}

/// Arguments of `get_device_status`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct GetDeviceStatusArgs {
    /// The name of the device, e.g., 'living room lamp'.
    pub device_name: String,
}

/// Arguments of `set_device_status`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct SetDeviceStatusArgs {
    /// The name of the device.
    pub device_name: String,
    /// The desired new status (e.g., 'on', 'off', 'locked').
    pub new_status: String,
    /// Optional settings like temperature for thermostats or brightness/color for lights.
    #[serde(default)]
    pub setting: Option<Setting>,
}

/// Device settings; each applies to one kind of device.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
pub struct Setting {
    /// Temperature in Celsius for thermostats.
    #[serde(default)]
    #[schemars(range(min = 5, max = 35))]
    pub temperature_celsius: Option<f64>,
    /// Brightness level (0-100) for lights.
    #[serde(default, deserialize_with = "whole_number")]
    #[schemars(range(min = 0, max = 100))]
    pub brightness: Option<i64>,
    /// Color name for lights (e.g., 'blue'), or a hex code like '#ff8800'.
    #[serde(default)]
    pub color: Option<String>,
}

/// Models often write integers as `50.0`; accept any whole number, so that range errors (not
/// type errors) are what the model hears about.
fn whole_number<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<i64>, D::Error> {
    let Some(number) = Option::<f64>::deserialize(deserializer)? else {
        return Ok(None);
    };
    if number.fract() != 0.0 || !number.is_finite() {
        return Err(serde::de::Error::custom(format!(
            "expected a whole number, found {number}"
        )));
    }
    // Anything this large is out of range anyway; saturating keeps the message meaningful.
    Ok(Some(number as i64))
}

/// `get_device_status`: reads one device's full state.
pub struct GetDeviceStatus {
    home: SmartHome,
}

impl GetDeviceStatus {
    pub fn new(home: SmartHome) -> Self {
        GetDeviceStatus { home }
    }
}

impl Tool for GetDeviceStatus {
    type Args = GetDeviceStatusArgs;

    fn name(&self) -> &'static str {
        "get_device_status"
    }

    fn description(&self) -> &'static str {
        "Gets the current status of a specified smart home device."
    }

    async fn call(&self, args: GetDeviceStatusArgs) -> Result<Value, ToolError> {
        Ok(self.home.device(&args.device_name)?.state())
    }
}

/// `set_device_status`: changes a device's status and settings.
pub struct SetDeviceStatus {
    home: SmartHome,
}

impl SetDeviceStatus {
    pub fn new(home: SmartHome) -> Self {
        SetDeviceStatus { home }
    }
}

impl Tool for SetDeviceStatus {
    type Args = SetDeviceStatusArgs;

    fn name(&self) -> &'static str {
        "set_device_status"
    }

    fn description(&self) -> &'static str {
        "Sets the status or a specific setting of a smart home device. For lights, 'on' or \
         'off'. For locks, 'locked' or 'unlocked'. For thermostats, temperature can be set \
         (status 'idle', 'heating' or 'cooling')."
    }

    async fn call(&self, args: SetDeviceStatusArgs) -> Result<Value, ToolError> {
        let report = self
            .home
            .set(&args.device_name, &args.new_status, args.setting.as_ref())?;
        let mut response = report.device.state();
        if let Some(map) = response.as_object_mut() {
            map.insert(
                "settings_updated".into(),
                Value::Object(report.settings_updated),
            );
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setting(value: Value) -> Setting {
        match serde_json::from_value(value) {
            Ok(setting) => setting,
            Err(error) => panic!("bad test setting: {error}"),
        }
    }

    fn error_of<T: std::fmt::Debug>(result: Result<T, ToolError>) -> String {
        match result {
            Err(error) => error.to_string(),
            Ok(value) => panic!("expected an error, got {value:?}"),
        }
    }

    #[test]
    fn initial_devices_are_the_lamp_thermostat_and_lock() -> Result<(), ToolError> {
        let home = SmartHome::new();
        assert_eq!(home.snapshot().len(), 3);
        assert_eq!(
            home.device("living room lamp")?.state(),
            json!({"device_name": "living room lamp", "type": "light", "status": "off", "brightness": 0, "color": "white"})
        );
        assert_eq!(
            home.device("kitchen thermostat")?.state(),
            json!({"device_name": "kitchen thermostat", "type": "thermostat", "status": "idle", "temperature_celsius": 20.0})
        );
        assert_eq!(
            home.device("front door lock")?.state(),
            json!({"device_name": "front door lock", "type": "lock", "status": "locked"})
        );
        Ok(())
    }

    #[test]
    fn names_match_loosely() -> Result<(), ToolError> {
        let home = SmartHome::new();
        for name in [
            "Living Room Lamp",
            "  living room lamp ",
            "the living room lamp",
            "The  Living   room lamp",
        ] {
            assert_eq!(home.device(name)?.name, "living room lamp", "{name}");
        }
        Ok(())
    }

    #[test]
    fn unknown_device_lists_known_ones() {
        let message = error_of(SmartHome::new().device("garage door"));
        assert!(message.contains("\"garage door\""), "{message}");
        for known in ["living room lamp", "kitchen thermostat", "front door lock"] {
            assert!(message.contains(known), "{message}");
        }
    }

    #[test]
    fn statuses_are_checked_per_device_kind() -> Result<(), ToolError> {
        let home = SmartHome::new();
        let message = error_of(home.set("front door lock", "on", None));
        assert!(message.contains("locked, unlocked"), "{message}");
        let message = error_of(home.set("living room lamp", "locked", None));
        assert!(message.contains("on, off"), "{message}");
        let message = error_of(home.set("kitchen thermostat", "off", None));
        assert!(message.contains("idle, heating, cooling"), "{message}");
        assert_eq!(
            home.set("front door lock", " Unlocked ", None)?
                .device
                .status,
            "unlocked"
        );
        assert_eq!(
            home.set("kitchen thermostat", "cooling", None)?
                .device
                .status,
            "cooling"
        );
        Ok(())
    }

    #[test]
    fn turning_the_lamp_on_gives_light() -> Result<(), ToolError> {
        let home = SmartHome::new();
        let report = home.set("living room lamp", "on", None)?;
        assert_eq!(report.device.brightness, Some(100));
        assert_eq!(report.settings_updated.get("brightness"), Some(&json!(100)));

        let home = SmartHome::new();
        let report = home.set(
            "living room lamp",
            "on",
            Some(&setting(json!({"brightness": 30}))),
        )?;
        assert_eq!(report.device.brightness, Some(30));

        // Off and on again keeps the brightness the lamp had.
        home.set("living room lamp", "off", None)?;
        assert_eq!(
            home.set("living room lamp", "on", None)?.device.brightness,
            Some(30)
        );
        Ok(())
    }

    #[test]
    fn brightness_is_range_checked() {
        let home = SmartHome::new();
        for bad in [101, -1, 1000] {
            let message = error_of(home.set(
                "living room lamp",
                "on",
                Some(&setting(json!({"brightness": bad}))),
            ));
            assert!(message.contains("0–100"), "{message}");
        }
        assert_eq!(
            home.device("living room lamp").map(|d| d.status),
            Ok("off".into())
        );
    }

    #[test]
    fn brightness_accepts_whole_floats_only() {
        assert_eq!(setting(json!({"brightness": 40.0})).brightness, Some(40));
        let error = serde_json::from_value::<Setting>(json!({"brightness": 40.5}));
        assert!(error.is_err());
        assert_eq!(setting(json!({"brightness": null})).brightness, None);
    }

    #[test]
    fn settings_must_fit_the_device() {
        let home = SmartHome::new();
        let message = error_of(home.set(
            "kitchen thermostat",
            "heating",
            Some(&setting(json!({"color": "blue"}))),
        ));
        assert!(
            message.contains("color") && message.contains("lights"),
            "{message}"
        );
        let message = error_of(home.set(
            "living room lamp",
            "on",
            Some(&setting(json!({"temperature_celsius": 21}))),
        ));
        assert!(
            message.contains("temperature_celsius") && message.contains("thermostats"),
            "{message}"
        );
        let message = error_of(home.set(
            "front door lock",
            "locked",
            Some(&setting(json!({"brightness": 10}))),
        ));
        assert!(message.contains("brightness"), "{message}");
        // Nothing was half-applied.
        assert_eq!(home.snapshot(), SmartHome::new().snapshot());
    }

    #[test]
    fn temperature_is_range_checked() -> Result<(), ToolError> {
        let home = SmartHome::new();
        for bad in [4.9, 35.5, -10.0, 100.0] {
            let message = error_of(home.set(
                "kitchen thermostat",
                "heating",
                Some(&setting(json!({"temperature_celsius": bad}))),
            ));
            assert!(message.contains("5–35"), "{message}");
        }
        let report = home.set(
            "kitchen thermostat",
            "heating",
            Some(&setting(json!({"temperature_celsius": 22.5}))),
        )?;
        assert_eq!(report.device.temperature_celsius, Some(22.5));
        Ok(())
    }

    #[test]
    fn colours_are_checked() -> Result<(), ToolError> {
        let home = SmartHome::new();
        for (given, stored) in [
            ("Blue", "blue"),
            ("warm-white", "warm white"),
            ("#FF8800", "#ff8800"),
        ] {
            let report = home.set(
                "living room lamp",
                "on",
                Some(&setting(json!({"color": given}))),
            )?;
            assert_eq!(report.device.color.as_deref(), Some(stored));
        }
        for bad in ["blurple", "#12345", "#ggg000", ""] {
            let message = error_of(home.set(
                "living room lamp",
                "on",
                Some(&setting(json!({"color": bad}))),
            ));
            assert!(
                message.contains("unknown colour") && message.contains("#rrggbb"),
                "{message}"
            );
        }
        Ok(())
    }

    #[test]
    fn changes_are_published_at_once() -> Result<(), ToolError> {
        let home = SmartHome::new();
        let mut watcher = home.subscribe();
        assert!(!watcher.has_changed().unwrap_or(true));

        home.clone().set("front door lock", "unlocked", None)?;
        assert_eq!(watcher.has_changed().ok(), Some(true));
        let lock = watcher
            .borrow_and_update()
            .iter()
            .find(|d| d.kind == DeviceKind::Lock)
            .cloned();
        assert_eq!(lock.map(|d| d.status), Some("unlocked".into()));

        // Failed and no-op updates publish nothing.
        let _ = home.set("front door lock", "open", None);
        home.set("front door lock", "unlocked", None)?;
        assert_eq!(watcher.has_changed().ok(), Some(false));
        Ok(())
    }

    #[tokio::test]
    async fn set_tool_returns_settings_updated_and_full_state() -> Result<(), ToolError> {
        let home = SmartHome::new();
        let tool = SetDeviceStatus::new(home.clone());
        let args: SetDeviceStatusArgs = serde_json::from_value(json!({
            "device_name": "the Living Room Lamp",
            "new_status": "on",
            "setting": {"color": "blue"},
        }))
        .map_err(|e| ToolError::failed(e.to_string()))?;
        let response = tool.call(args).await?;
        assert_eq!(
            response,
            json!({
                "device_name": "living room lamp",
                "type": "light",
                "status": "on",
                "brightness": 100,
                "color": "blue",
                "settings_updated": {"color": "blue", "brightness": 100},
            })
        );
        let get = GetDeviceStatus::new(home);
        let state = get
            .call(GetDeviceStatusArgs {
                device_name: "living room lamp".into(),
            })
            .await?;
        assert_eq!(state["status"], "on");
        assert_eq!(state["color"], "blue");
        Ok(())
    }

    #[test]
    fn device_serializes_for_observers() {
        let devices = SmartHome::new().snapshot();
        assert_eq!(
            serde_json::to_value(&devices[2]).ok(),
            Some(json!({"name": "front door lock", "kind": "lock", "status": "locked"}))
        );
    }
}
