//! The scripted model's behaviour, turn by turn: what it calls for each request and what it
//! says once the results are in.

use std::time::Duration;

use serde_json::{Value, json};

use super::tools::{END_SESSION, GET_CURRENT_TIME, GET_DEVICE_STATUS, SET_DEVICE_STATUS};
use super::understanding::WHICH_DEVICE;
use super::*;
use livetalk_live::wire::FunctionDeclaration;

const ALL_TOOLS: [&str; 4] = [
    GET_DEVICE_STATUS,
    SET_DEVICE_STATUS,
    GET_CURRENT_TIME,
    END_SESSION,
];

fn model() -> ScriptedModel {
    ScriptedModel::new(ALL_TOOLS.map(str::to_owned))
}

fn model_with(tools: &[&str]) -> ScriptedModel {
    ScriptedModel::new(tools.iter().map(|tool| (*tool).to_owned()))
}

fn call(name: &str, args: Value) -> PlannedCall {
    PlannedCall {
        name: name.to_owned(),
        args,
    }
}

fn calls(step: ModelStep) -> Vec<PlannedCall> {
    match step {
        ModelStep::CallTools(calls) => calls,
        other => panic!("expected tool calls, got {other:?}"),
    }
}

fn reply(step: ModelStep) -> String {
    match step {
        ModelStep::Reply(reply) => reply,
        other => panic!("expected a plain reply, got {other:?}"),
    }
}

/// Answers each call with the matching response, in order.
fn answer(model: &mut ScriptedModel, planned: &[PlannedCall], responses: &[Value]) -> ModelStep {
    assert_eq!(planned.len(), responses.len(), "one response per call");
    let results: Vec<(PlannedCall, Value)> = planned
        .iter()
        .cloned()
        .zip(responses.iter().cloned())
        .collect();
    model.tool_results(&results)
}

fn set_call(device: &str, status: &str, setting: Option<Value>) -> PlannedCall {
    let mut args = json!({ "device_name": device, "new_status": status });
    if let (Some(setting), Some(object)) = (setting, args.as_object_mut()) {
        object.insert("setting".to_owned(), setting);
    }
    call(SET_DEVICE_STATUS, args)
}

fn get_call(device: &str) -> PlannedCall {
    call(GET_DEVICE_STATUS, json!({ "device_name": device }))
}

#[test]
fn three_turn_smart_home_dialogue() {
    let mut model = model();

    let planned = calls(model.user_turn("Is the living room lamp on?"));
    assert_eq!(planned, vec![get_call("living room lamp")]);
    let said = reply(answer(
        &mut model,
        &planned,
        &[json!({"device_name": "living room lamp", "status": "off"})],
    ));
    assert_eq!(said, "No, the living room lamp is currently off.");

    let planned = calls(model.user_turn("Okay, please turn it on and set its color to blue."));
    assert_eq!(
        planned,
        vec![set_call(
            "living room lamp",
            "on",
            Some(json!({"color": "blue"}))
        )]
    );
    let said = reply(answer(
        &mut model,
        &planned,
        &[
            json!({"device_name": "living room lamp", "status": "on", "settings_updated": {"color": "blue"}}),
        ],
    ));
    assert_eq!(
        said,
        "Alright, I've turned on the living room lamp and set its color to blue."
    );

    let planned = calls(model.user_turn("What's the kitchen thermostat set to?"));
    assert_eq!(planned, vec![get_call("kitchen thermostat")]);
    let said = reply(answer(
        &mut model,
        &planned,
        &[
            json!({"device_name": "kitchen thermostat", "status": "idle", "temperature_celsius": 20}),
        ],
    ));
    assert_eq!(
        said,
        "The kitchen thermostat is idle and set to 20 degrees Celsius."
    );
}

#[test]
fn thermostat_reading_without_temperature_says_only_the_status() {
    let mut model = model();
    let planned = calls(model.user_turn("what's the thermostat set to"));
    let said = reply(answer(
        &mut model,
        &planned,
        &[json!({"device_name": "kitchen thermostat", "status": "idle"})],
    ));
    assert_eq!(said, "The kitchen thermostat is idle.");
}

#[test]
fn pronouns_follow_the_last_device_mentioned() {
    let mut model = model();
    let planned = calls(model.user_turn("is the door locked"));
    assert_eq!(planned, vec![get_call("front door lock")]);
    let said = reply(answer(&mut model, &planned, &[json!({"status": "locked"})]));
    assert_eq!(said, "Yes, the front door is locked.");

    let planned = calls(model.user_turn("Unlock it please."));
    assert_eq!(planned, vec![set_call("front door lock", "unlocked", None)]);
    let said = reply(answer(
        &mut model,
        &planned,
        &[json!({"status": "unlocked"})],
    ));
    assert_eq!(said, "Alright, I've unlocked the front door.");

    // A request only the lamp can satisfy goes to the lamp even though "it" was the door.
    let planned = calls(model.user_turn("make it red"));
    assert_eq!(
        planned,
        vec![set_call(
            "living room lamp",
            "on",
            Some(json!({"color": "red"}))
        )]
    );
    let _ = answer(&mut model, &planned, &[json!({"status": "on"})]);
    let planned = calls(model.user_turn("now turn it off"));
    assert_eq!(planned, vec![set_call("living room lamp", "off", None)]);
}

#[test]
fn pronoun_without_any_earlier_device_asks_which() {
    let mut model = model();
    let said = reply(model.user_turn("turn it on"));
    assert_eq!(said, WHICH_DEVICE);
}

#[test]
fn one_request_naming_several_devices_makes_several_calls() {
    let mut model = model();
    let planned = calls(model.user_turn("Turn on the lamp and lock the door"));
    assert_eq!(
        planned,
        vec![
            set_call("living room lamp", "on", None),
            set_call("front door lock", "locked", None)
        ]
    );
    let said = reply(answer(
        &mut model,
        &planned,
        &[json!({"status": "on"}), json!({"status": "locked"})],
    ));
    assert_eq!(
        said,
        "Alright, I've turned on the living room lamp and locked the front door."
    );

    let planned = calls(model.user_turn("is the lamp on and the door locked?"));
    assert_eq!(
        planned,
        vec![get_call("living room lamp"), get_call("front door lock")]
    );
    let said = reply(answer(
        &mut model,
        &planned,
        &[
            json!({"status": "on", "brightness": 80, "color": "red"}),
            json!({"status": "unlocked"}),
        ],
    ));
    assert_eq!(
        said,
        "Yes, the living room lamp is on at 80% brightness with its color set to red. \
         No, the front door is currently unlocked."
    );

    let planned = calls(model.user_turn("switch off the light and the thermostat"));
    assert_eq!(
        planned,
        vec![
            set_call("living room lamp", "off", None),
            set_call("kitchen thermostat", "idle", None)
        ]
    );
}

#[test]
fn lamp_commands() {
    let mut model = model();
    let planned = calls(model.user_turn("Dim the lamp to 30%"));
    assert_eq!(
        planned,
        vec![set_call(
            "living room lamp",
            "on",
            Some(json!({"brightness": 30}))
        )]
    );
    let said = reply(answer(
        &mut model,
        &planned,
        &[json!({"status": "on", "brightness": 30})],
    ));
    assert_eq!(
        said,
        "Alright, I've set the living room lamp's brightness to 30%."
    );

    let planned = calls(model.user_turn("set the living room light brightness to fifty percent"));
    assert_eq!(
        planned,
        vec![set_call(
            "living room lamp",
            "on",
            Some(json!({"brightness": 50}))
        )]
    );
    let _ = answer(&mut model, &planned, &[json!({"status": "on"})]);

    // Relative changes use the brightness seen in the last result.
    let planned = calls(model.user_turn("make the lamp a bit brighter"));
    assert_eq!(
        planned,
        vec![set_call(
            "living room lamp",
            "on",
            Some(json!({"brightness": 70}))
        )]
    );

    let planned = calls(model.user_turn("LIGHTS OFF"));
    assert_eq!(planned, vec![set_call("living room lamp", "off", None)]);
    let said = reply(answer(&mut model, &planned, &[json!({"status": "off"})]));
    assert_eq!(said, "Alright, I've turned off the living room lamp.");

    let planned = calls(model.user_turn("Turn the lamp on, set it to warm white and 40 percent"));
    assert_eq!(
        planned,
        vec![set_call(
            "living room lamp",
            "on",
            Some(json!({"brightness": 40, "color": "warm white"}))
        )]
    );
    let said = reply(answer(&mut model, &planned, &[json!({"status": "on"})]));
    assert_eq!(
        said,
        "Alright, I've turned on the living room lamp, set its brightness to 40% and set its color to warm white."
    );
}

#[test]
fn lamp_questions() {
    let mut model = model();
    let planned = calls(model.user_turn("what color is the lamp?"));
    assert_eq!(planned, vec![get_call("living room lamp")]);
    let said = reply(answer(
        &mut model,
        &planned,
        &[json!({"status": "on", "color": "blue", "brightness": 60})],
    ));
    assert_eq!(said, "The living room lamp's color is blue.");

    let planned = calls(model.user_turn("how bright is it"));
    let said = reply(answer(
        &mut model,
        &planned,
        &[json!({"status": "off", "brightness": 60})],
    ));
    assert_eq!(
        said,
        "The living room lamp is set to 60% brightness, though it's currently off."
    );

    let planned = calls(model.user_turn("Is the living room lamp off?"));
    let said = reply(answer(&mut model, &planned, &[json!({"status": "off"})]));
    assert_eq!(said, "Yes, the living room lamp is off.");
}

#[test]
fn thermostat_commands() {
    let mut model = model();
    let planned = calls(model.user_turn("Set the thermostat to 22 degrees"));
    assert_eq!(
        planned,
        vec![set_call(
            "kitchen thermostat",
            "heating",
            Some(json!({"temperature_celsius": 22}))
        )]
    );
    let said = reply(answer(
        &mut model,
        &planned,
        &[json!({"status": "heating", "settings_updated": {"temperature_celsius": 22}})],
    ));
    assert_eq!(
        said,
        "Alright, I've set the kitchen thermostat to 22 degrees Celsius. The thermostat is now heating."
    );

    let planned = calls(model.user_turn("make the kitchen cooler"));
    assert_eq!(
        planned,
        vec![set_call(
            "kitchen thermostat",
            "cooling",
            Some(json!({"temperature_celsius": 20}))
        )]
    );

    let planned = calls(model.user_turn("set the heating to 21.5°C"));
    assert_eq!(
        planned,
        vec![set_call(
            "kitchen thermostat",
            "cooling",
            Some(json!({"temperature_celsius": 21.5}))
        )]
    );

    let planned = calls(model.user_turn("turn off the thermostat"));
    assert_eq!(planned, vec![set_call("kitchen thermostat", "idle", None)]);
    let said = reply(answer(&mut model, &planned, &[json!({"status": "idle"})]));
    assert_eq!(
        said,
        "Alright, I've switched the kitchen thermostat to idle."
    );

    let planned = calls(model.user_turn("set the thermostat to seventy two fahrenheit"));
    assert_eq!(
        planned,
        vec![set_call(
            "kitchen thermostat",
            "idle",
            Some(json!({"temperature_celsius": 22}))
        )]
    );
}

#[test]
fn relative_change_to_an_unknown_value_reads_the_device_first() {
    let mut model = model();
    let planned = calls(model.user_turn("make it warmer in the kitchen"));
    assert_eq!(planned, vec![get_call("kitchen thermostat")]);
    let next = calls(answer(
        &mut model,
        &planned,
        &[json!({"status": "idle", "temperature_celsius": 19})],
    ));
    assert_eq!(
        next,
        vec![set_call(
            "kitchen thermostat",
            "heating",
            Some(json!({"temperature_celsius": 21}))
        )]
    );
    let said = reply(answer(&mut model, &next, &[json!({"status": "heating"})]));
    assert_eq!(
        said,
        "Alright, I've set the kitchen thermostat to 21 degrees Celsius. The thermostat is now heating."
    );
}

#[test]
fn lock_commands_and_questions() {
    let mut model = model();
    for (text, status) in [
        ("Lock the front door", "locked"),
        ("please unlock the door", "unlocked"),
        ("can you lock it?", "locked"),
        ("open the front door", "unlocked"),
    ] {
        let planned = calls(model.user_turn(text));
        assert_eq!(
            planned,
            vec![set_call("front door lock", status, None)],
            "{text}"
        );
        let _ = answer(&mut model, &planned, &[json!({"status": status})]);
    }
    let planned = calls(model.user_turn("is the lock locked"));
    assert_eq!(planned, vec![get_call("front door lock")]);
    let said = reply(answer(
        &mut model,
        &planned,
        &[json!({"status": "unlocked"})],
    ));
    assert_eq!(said, "No, the front door is currently unlocked.");
    let planned = calls(model.user_turn("check the lock"));
    let said = reply(answer(&mut model, &planned, &[json!({"status": "locked"})]));
    assert_eq!(said, "The front door is locked.");
}

/// The error `set_device_status` gives, as the dispatcher wraps it.
fn tool_error(message: &str) -> Value {
    json!({"success": false, "error": message})
}

#[test]
fn impossible_requests_reach_the_tool_and_its_error_is_phrased() {
    let mut model = model();
    // Out of range: passed on as heard, not quietly made 100%.
    let planned = calls(model.user_turn("set the lamp to 250%"));
    assert_eq!(
        planned,
        vec![set_call(
            "living room lamp",
            "on",
            Some(json!({"brightness": 250}))
        )]
    );
    let said = reply(answer(
        &mut model,
        &planned,
        &[tool_error("brightness 250 is out of range; use 0–100")],
    ));
    assert_eq!(
        said,
        "Sorry, I couldn't set the living room lamp's brightness to 250%: brightness 250 is out of range; use 0–100."
    );

    // A device the home does not have reaches the tool, which names the ones it has.
    let planned = calls(model.user_turn("turn on the garage light"));
    assert_eq!(planned, vec![set_call("garage light", "on", None)]);
    let said = reply(answer(
        &mut model,
        &planned,
        &[tool_error(
            "no device called \"garage light\"; known devices: living room lamp, kitchen thermostat, front door lock",
        )],
    ));
    assert_eq!(
        said,
        "Sorry, I couldn't change the garage light: no device called \"garage light\"; known devices: living room lamp, kitchen thermostat, front door lock."
    );
    let planned = calls(model.user_turn("is the bedroom lamp on?"));
    assert_eq!(
        planned,
        vec![call(
            GET_DEVICE_STATUS,
            json!({"device_name": "bedroom lamp"})
        )]
    );

    // What a device cannot do is asked of it all the same.
    assert_eq!(
        calls(model.user_turn("turn on the front door")),
        vec![set_call("front door lock", "on", None)]
    );
    assert_eq!(
        calls(model.user_turn("lock the lamp")),
        vec![set_call("living room lamp", "locked", None)]
    );
    let planned = calls(model.user_turn("make the thermostat blue"));
    assert_eq!(planned[0].args["setting"], json!({"color": "blue"}));
    let said = reply(answer(
        &mut model,
        &planned,
        &[tool_error(
            "color does not apply to the kitchen thermostat (a thermostat); it only applies to light",
        )],
    ));
    assert!(
        said.starts_with("Sorry, I couldn't change the kitchen thermostat: color does not apply"),
        "{said}"
    );
    // A number means nothing to a lock, not even a wrong setting.
    assert_eq!(
        reply(model.user_turn("set the front door to 5")),
        "The front door lock can only be locked or unlocked."
    );
}

#[test]
fn any_declared_tool_is_called_by_name_and_its_answer_phrased() {
    let echo = FunctionDeclaration {
        name: "echo".to_owned(),
        parameters: Some(json!({
            "type": "OBJECT",
            "properties": {"message": {"type": "STRING"}},
            "required": ["message"]
        })),
        ..FunctionDeclaration::default()
    };
    let mut model = ScriptedModel::with_declarations([echo]);
    let planned = calls(model.user_turn("use the echo tool with message hello"));
    assert_eq!(planned, vec![call("echo", json!({"message": "hello"}))]);
    let said = reply(answer(
        &mut model,
        &planned,
        &[json!({"result": "Echo: hello"})],
    ));
    assert_eq!(said, "The echo tool answered: Echo: hello.");
    let planned = calls(model.user_turn("call echo with message boom"));
    let said = reply(answer(
        &mut model,
        &planned,
        &[tool_error("echo is broken")],
    ));
    assert_eq!(said, "Sorry, I couldn't run echo: echo is broken.");
    let said = reply(model.user_turn("use the echo tool"));
    assert!(said.starts_with("To call echo I need message"), "{said}");
    // Smart-home requests still go the usual way (and this session has no such tools).
    let said = reply(model.user_turn("turn on the lamp"));
    assert!(said.contains("set_device_status"), "{said}");
    let said = reply(model.user_turn("help"));
    assert!(
        said.contains("call your tools by name (echo)") && !said.contains("nothing I can do"),
        "{said}"
    );
}

#[test]
fn time_and_goodbye() {
    let mut model = model();
    let planned = calls(model.user_turn("What time is it?"));
    assert_eq!(planned, vec![call(GET_CURRENT_TIME, json!({}))]);
    let said = reply(answer(
        &mut model,
        &planned,
        &[json!({"current_time": "2024-05-01T15:04:05+02:00", "timezone": "Europe/Paris"})],
    ));
    assert_eq!(said, "It's 3:04 PM on Wednesday, May 1 (Europe/Paris).");

    let planned = calls(model.user_turn("what's the time"));
    let said = reply(answer(&mut model, &planned, &[json!({"time": "09:30"})]));
    assert_eq!(said, "It's 9:30 AM.");

    let planned = calls(model.user_turn("time?"));
    let said = reply(answer(
        &mut model,
        &planned,
        &[json!({"time": "half past nine"})],
    ));
    assert_eq!(said, "The current time is half past nine.");

    let planned = calls(model.user_turn("That's all, thanks. Bye!"));
    assert_eq!(
        planned,
        vec![call(
            END_SESSION,
            json!({"reason": "the user said goodbye"})
        )]
    );
    let said = reply(answer(&mut model, &planned, &[json!({"success": true})]));
    assert_eq!(said, "Goodbye! Ending the session now.");
}

#[test]
fn goodbye_comes_after_other_calls() {
    let mut model = model();
    let planned = calls(model.user_turn("goodbye, and turn off the lamp"));
    assert_eq!(
        planned,
        vec![
            set_call("living room lamp", "off", None),
            call(END_SESSION, json!({"reason": "the user said goodbye"}))
        ]
    );
    let said = reply(answer(
        &mut model,
        &planned,
        &[json!({"status": "off"}), json!({})],
    ));
    assert_eq!(
        said,
        "Alright, I've turned off the living room lamp. Goodbye! Ending the session now."
    );
}

#[test]
fn undeclared_tools_are_never_called() {
    let mut model = model_with(&[GET_DEVICE_STATUS]);
    assert_eq!(
        reply(model.user_turn("turn on the lamp")),
        "I can't change the living room lamp, because this session didn't declare the set_device_status tool."
    );
    assert_eq!(
        reply(model.user_turn("what time is it")),
        "I can't tell you the time, because this session didn't declare the get_current_time tool."
    );
    assert_eq!(
        reply(model.user_turn("bye")),
        "Goodbye! I can't end the session myself, because this session didn't declare the end_session tool."
    );
    // The declared part of a mixed request still runs, and the rest is explained.
    let planned = calls(model.user_turn("is the lamp on and lock the door"));
    assert_eq!(planned, vec![get_call("living room lamp")]);
    let said = reply(answer(&mut model, &planned, &[json!({"status": "on"})]));
    assert_eq!(
        said,
        "Yes, the living room lamp is on. I can't change the front door, because this session didn't declare the set_device_status tool."
    );

    let mut bare = model_with(&[]);
    let said = reply(bare.user_turn("is the lamp on"));
    assert!(said.contains("get_device_status"), "{said}");
    let said = reply(bare.user_turn("blah"));
    assert!(said.contains("didn't declare any of my tools"), "{said}");
}

#[test]
fn relative_change_without_a_status_tool_asks_for_a_value() {
    let mut model = model_with(&[SET_DEVICE_STATUS]);
    assert_eq!(
        reply(model.user_turn("make it warmer in the kitchen")),
        "I don't know the current temperature of the kitchen thermostat, so please tell me the exact value you want."
    );
}

#[test]
fn error_results_are_reported_in_plain_words() {
    let mut model = model();
    let planned = calls(model.user_turn("turn on the lamp"));
    let said = reply(answer(
        &mut model,
        &planned,
        &[json!({"success": false, "error": "Device is offline."})],
    ));
    assert_eq!(
        said,
        "Sorry, I couldn't turn on the living room lamp: device is offline."
    );

    let planned = calls(model.user_turn("is the door locked"));
    let said = reply(answer(
        &mut model,
        &planned,
        &[json!({"error": {"message": "Lock unreachable"}})],
    ));
    assert_eq!(
        said,
        "Sorry, I couldn't check the front door: lock unreachable."
    );

    let planned = calls(model.user_turn("set the thermostat to 25"));
    let said = reply(answer(&mut model, &planned, &[json!({"success": false})]));
    assert_eq!(
        said,
        "Sorry, I couldn't set the kitchen thermostat to 25 degrees Celsius: the tool reported a failure without saying why."
    );

    let planned = calls(model.user_turn("bye"));
    let said = reply(answer(
        &mut model,
        &planned,
        &[json!({"error": "not allowed"})],
    ));
    assert_eq!(
        said,
        "Goodbye! I couldn't end the session myself: not allowed."
    );
}

#[test]
fn results_in_an_output_envelope_are_understood() {
    let mut model = model();
    let planned = calls(model.user_turn("Is the living room lamp on?"));
    let said = reply(answer(
        &mut model,
        &planned,
        &[json!({"output": {"status": "on"}})],
    ));
    assert_eq!(said, "Yes, the living room lamp is on.");
}

#[test]
fn a_device_reporting_a_different_state_is_believed() {
    let mut model = model();
    let planned = calls(model.user_turn("lock the door"));
    let said = reply(answer(
        &mut model,
        &planned,
        &[json!({"status": "unlocked"})],
    ));
    assert_eq!(
        said,
        "I asked for the front door to be locked, but it reports unlocked."
    );
}

#[test]
fn unknown_requests_get_help_not_calls() {
    let mut model = model();
    for text in ["What's the weather like?", "sing me a song", "", "   "] {
        let said = reply(model.user_turn(text));
        assert!(
            said.starts_with("Sorry, I didn't understand that."),
            "{text}: {said}"
        );
        assert!(said.contains("living room lamp"), "{said}");
        assert!(said.contains("\"dim the lamp to 30%\""), "{said}");
    }
    let said = reply(model.user_turn("Hello!"));
    assert!(
        said.starts_with("Hello! I'm the livetalk demo model"),
        "{said}"
    );
    // Not about the lamp just because the lamp came up before.
    let _ = model.user_turn("is the lamp on");
    for text in ["make me a sandwich", "what's the weather like?"] {
        let said = reply(model.user_turn(text));
        assert!(
            said.starts_with("Sorry, I didn't understand that."),
            "{text}: {said}"
        );
    }
    let said = reply(model.user_turn("what can you do?"));
    assert!(said.starts_with("I'm the livetalk demo model"), "{said}");
    assert_eq!(
        reply(model.user_turn("thanks")),
        "You're welcome! Anything else?"
    );
}

#[test]
fn audio_turns_are_acknowledged() {
    let mut model = model();
    let said = reply(model.audio_turn(Duration::from_millis(2300)));
    assert!(
        said.starts_with("I heard about 2.3 seconds of speech"),
        "{said}"
    );
    assert!(said.contains("type your request"), "{said}");
}

#[test]
fn results_without_a_pending_plan_are_still_phrased() {
    let mut model = model();
    let said = reply(model.tool_results(&[(
        set_call("living room lamp", "on", Some(json!({"color": "green"}))),
        json!({"status": "on"}),
    )]));
    assert_eq!(
        said,
        "Alright, I've turned on the living room lamp and set its color to green."
    );
}

#[test]
fn serde_round_trip_keeps_the_conversation() {
    let mut model = model();
    let planned = calls(model.user_turn("Is the living room lamp on?"));
    let _ = answer(
        &mut model,
        &planned,
        &[json!({"status": "off", "brightness": 40})],
    );
    let planned = calls(model.user_turn("make it brighter"));

    let saved = serde_json::to_string(&model).expect("model serializes");
    let mut restored: ScriptedModel = serde_json::from_str(&saved).expect("model deserializes");
    assert_eq!(
        serde_json::to_string(&restored).expect("serializes again"),
        saved
    );

    assert_eq!(
        planned,
        vec![set_call(
            "living room lamp",
            "on",
            Some(json!({"brightness": 60}))
        )]
    );
    let said = reply(answer(
        &mut restored,
        &planned,
        &[json!({"status": "on", "brightness": 60})],
    ));
    assert_eq!(
        said,
        "Alright, I've turned on the living room lamp and set its brightness to 60%."
    );
    // "it" still means the lamp after the restore.
    let planned = calls(restored.user_turn("turn it off"));
    assert_eq!(planned, vec![set_call("living room lamp", "off", None)]);
}

#[test]
fn only_an_ask_for_one_sentence_cuts_replies_short() {
    let mut m = model();
    // livetalk's default instruction asks for brief answers, which these replies already are.
    m.follow_instruction(
        "You are the voice assistant of livetalk. Answer briefly, in a friendly spoken style.",
    );
    let full = reply(m.user_turn("what can you do?"));
    assert!(
        full.trim_end_matches('.').contains(". "),
        "more than one sentence: {full}"
    );
    m.follow_instruction("Answer in one sentence.");
    let short = reply(m.user_turn("what can you do?"));
    assert!(
        full.starts_with(&short) && short.len() < full.len(),
        "{short} / {full}"
    );
    m.follow_instruction("Be friendly.");
    assert_eq!(
        reply(m.user_turn("what can you do?")),
        full,
        "a later instruction replaces it"
    );
}

/// docs/mock.md names the words that cut replies short, each of them and no other, and each
/// does; asking for brief or short answers in other words does not.
#[test]
fn the_guide_names_every_word_that_cuts_replies_short() {
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/mock.md"),
    )
    .unwrap();
    let paragraph = page
        .split("\n\n")
        .find(|p| p.starts_with("It follows the system instruction"))
        .expect("the paragraph on the system instruction")
        .replace('\n', " ");
    let listed = paragraph
        .split("with any of the words")
        .nth(1)
        .and_then(|rest| rest.split(", keeps").next())
        .expect("the list of words");
    let mut named: Vec<&str> = listed.split('"').skip(1).step_by(2).collect();
    named.sort_unstable();
    let mut cues = super::BRIEF_CUES.to_vec();
    cues.sort_unstable();
    assert_eq!(named, cues, "{paragraph}");
    let full = reply(model().user_turn("what can you do?"));
    for cue in super::BRIEF_CUES {
        let mut m = model();
        m.follow_instruction(&format!("Keep it {cue}, please."));
        let short = reply(m.user_turn("what can you do?"));
        assert!(short.len() < full.len(), "{cue}: {short}");
    }
    for words in ["Answer briefly.", "Give short answers.", "Be brief."] {
        let mut m = model();
        m.follow_instruction(words);
        assert_eq!(reply(m.user_turn("what can you do?")), full, "{words}");
    }
}

/// Each prompt the app suggests, as the first turn of a fresh conversation: tool calls the
/// request asks for, then a reply that neither fails to understand nor asks which device.
#[test]
fn the_suggested_prompts_are_understood_as_first_turns() {
    let home = json!({
        "living room lamp": {"device_name": "living room lamp", "type": "light", "status": "on", "brightness": 100, "color": "blue"},
        "kitchen thermostat": {"device_name": "kitchen thermostat", "type": "thermostat", "status": "heating", "temperature_celsius": 22.0},
        "front door lock": {"device_name": "front door lock", "type": "lock", "status": "locked"},
    });
    for prompt in DEMO_PROMPTS {
        let mut model = model();
        let planned = match model.user_turn(prompt) {
            ModelStep::CallTools(calls) => calls,
            said => panic!("{prompt:?} was answered without a call: {said:?}"),
        };
        let responses: Vec<Value> = planned
            .iter()
            .map(
                |call| match call.args.get("device_name").and_then(Value::as_str) {
                    Some(device) => home[device].clone(),
                    None => json!({"time": "10:30", "success": true}),
                },
            )
            .collect();
        let said = reply(answer(&mut model, &planned, &responses));
        assert!(
            !said.contains("Sorry") && !said.contains(WHICH_DEVICE),
            "{prompt:?}: {planned:?} → {said:?}"
        );
    }
}
