//! `livetalk check`: recordings and written scenarios as regression tests for a voice agent.
//! Each file runs against the model chosen the usual way (the offline demo model, Gemini, an
//! endpoint, Vertex AI), with the config's tools running locally, headless; its turns are
//! judged ([`compare`]) and reported ([`report`]); `--repeat` gives pass rates. The scenario
//! files and what a recording becomes are [`scenario`], one session's run is [`runner`].

mod args;
pub mod compare;
pub mod report;
pub mod runner;
pub mod scenario;

use std::path::{Path, PathBuf};

use crate::config::{FlagOverrides, RouteKind, Settings};
use crate::output;
use crate::record::{LOG_FILE, Recording, locate};
pub use args::CheckArgs;
use report::{FileReport, Format, Target, TurnReport};
use runner::RunEnd;
use scenario::{BadScenario, Input, Scenario};

/// Exit statuses.
pub const PASSED: u8 = 0;
pub const FAILED: u8 = 1;
pub const UNREADABLE: u8 = 2;
pub const UNREACHABLE: u8 = 3;

/// Runs `livetalk check`; returns the exit status.
pub async fn run(args: CheckArgs, flags: FlagOverrides) -> u8 {
    let flags = args.overrides(flags);
    let base = match Settings::load(&flags) {
        Ok(settings) => settings,
        Err(e) => {
            output::err(&format!("livetalk: {e}"));
            return UNREADABLE;
        }
    };
    if let Some(recording) = &args.write_scenario {
        return write_scenario(recording, args.out.as_deref(), &base);
    }
    if let Err(e) = base.key_usable() {
        output::err(&format!("livetalk: {e}"));
        return UNREADABLE;
    }
    let mut scenarios = Vec::new();
    let mut unreadable = false;
    for path in &args.paths {
        match gather(path, &base.sessions_dir) {
            Ok(found) => scenarios.extend(found.into_iter().map(|s| (path.clone(), s))),
            Err(problems) => {
                unreadable = true;
                for BadScenario(problem) in problems {
                    output::err(&format!("livetalk: {problem}"));
                }
            }
        }
    }
    if unreadable {
        return UNREADABLE;
    }
    let format = if args.json {
        Format::Json
    } else {
        Format::Text
    };
    let repeat = args.repeat as usize;
    if let Err(problem) = outputs_writable(&args, &scenarios, repeat) {
        output::err(&format!("livetalk: {problem}"));
        return UNREADABLE;
    }
    // Each file's model (a recording's own, unless --model says otherwise), known before
    // anything runs: the first line names them with the route.
    let mut models = Vec::new();
    for (_, scenario) in &scenarios {
        match run_settings(&flags, &args, scenario, 1) {
            Ok(settings) => models.push(settings.model),
            Err(e) => {
                output::err(&format!("livetalk: {e}"));
                return UNREADABLE;
            }
        }
    }
    let (kind, route) = base.route_name();
    let mut target = Target {
        kind,
        route,
        why: (kind == RouteKind::Demo).then_some(if flags.offline {
            "--offline"
        } else {
            "no API key is set: set GEMINI_API_KEY to check against Gemini"
        }),
        models: Vec::new(),
    };
    for model in &models {
        if !target.models.contains(model) {
            target.models.push(model.clone());
        }
    }
    report::checking(format, &target, scenarios.len());
    let mut files = Vec::new();
    for ((given, scenario), model) in scenarios.iter().zip(models) {
        let file = FileReport {
            file: given.display().to_string(),
            name: scenario.name.clone(),
            model,
            titles: scenario.turns.iter().map(|t| t.input.title()).collect(),
            runs: Vec::new(),
        };
        match run_file(file, scenario, &flags, &args, format).await {
            Ok(file) => files.push(file),
            Err(code) => return code,
        }
    }
    let mut exit = if files.iter().all(|f| f.pass_rate() >= args.min_pass_rate) {
        PASSED
    } else {
        FAILED
    };
    if let Some(path) = &args.junit
        && let Err(e) = std::fs::write(
            path,
            livetalk_live::redact::scrub(&report::junit(&target, &files, args.min_pass_rate))
                .as_bytes(),
        )
    {
        output::err(&format!(
            "livetalk: error: cannot write the JUnit report {}: {e}",
            path.display()
        ));
        exit = exit.max(FAILED);
    }
    report::summary(format, &target, &files, args.min_pass_rate, exit);
    exit
}

/// What the runs will write must be writable before the first one runs: a report or a folder
/// that cannot be made is the user's to fix, not a run's failure.
fn outputs_writable(
    args: &CheckArgs,
    scenarios: &[(PathBuf, Scenario)],
    repeat: usize,
) -> Result<(), String> {
    if let Some(path) = &args.junit
        && let Err(e) = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
    {
        return Err(format!(
            "--junit {}: the report cannot be written there: {}",
            path.display(),
            livetalk_live::file::io_reason(&e)
        ));
    }
    if let Some(dir) = &args.record {
        std::fs::create_dir_all(dir).map_err(|e| {
            format!(
                "--record {}: the folder cannot be made: {}",
                dir.display(),
                livetalk_live::file::io_reason(&e)
            )
        })?;
        folders_free(dir, scenarios, repeat)?;
    }
    Ok(())
}

/// Each run records into a folder of its own: one already used (an earlier check's) or used
/// twice (two files of one name) is said before anything runs.
fn folders_free(
    dir: &Path,
    scenarios: &[(PathBuf, Scenario)],
    repeat: usize,
) -> Result<(), String> {
    let mut folders = std::collections::BTreeSet::new();
    for (_, scenario) in scenarios {
        for run in 1..=repeat {
            let folder = record_folder(dir, scenario, run);
            if folder.join(LOG_FILE).exists() || !folders.insert(folder.clone()) {
                return Err(format!(
                    "--record {}: {} already holds a recording; give another folder",
                    dir.display(),
                    folder.display()
                ));
            }
        }
    }
    Ok(())
}

/// Every run of one file, each turn judged and reported as it ends; the exit status when a
/// run cannot go on (its settings are bad, the model cannot be reached).
async fn run_file(
    mut file: FileReport,
    scenario: &Scenario,
    flags: &FlagOverrides,
    args: &CheckArgs,
    format: Format,
) -> Result<FileReport, u8> {
    let repeat = args.repeat as usize;
    for run in 1..=repeat {
        report::run_started(format, &file, run, repeat);
        let settings = run_settings(flags, args, scenario, run).map_err(|e| {
            output::err(&format!("livetalk: {e}"));
            UNREADABLE
        })?;
        let results = match runner::run(scenario, &settings).await {
            Ok(RunEnd::Ran(results)) => results,
            Ok(RunEnd::Unreachable(reason)) => {
                output::err(&format!(
                    "livetalk: error: cannot reach the model at {}: {reason}",
                    settings.endpoint_label()
                ));
                return Err(UNREACHABLE);
            }
            Err(e) => {
                output::err(&format!("livetalk: error: {e:#}"));
                return Err(UNREACHABLE);
            }
        };
        let mut turns = Vec::new();
        for (index, (turn, result)) in scenario.turns.iter().zip(results).enumerate() {
            let mut problems = Vec::new();
            if let Some(why) = &result.incomplete {
                problems.push(why.clone());
            }
            if !result.not_run {
                problems.extend(compare::judge(&turn.expect, &result.observed, args.r#match));
            }
            let judged = TurnReport { problems, result };
            report::turn(format, &file, run, index, &judged);
            turns.push(judged);
        }
        file.runs.push(turns);
    }
    report::file_done(format, &file, args.min_pass_rate);
    Ok(file)
}

/// The scenarios `path` names: a scenario file, a recording (its folder, its `session.jsonl`
/// or its name), or a folder of scenario files.
fn gather(path: &Path, sessions_dir: &Path) -> Result<Vec<Scenario>, Vec<BadScenario>> {
    if path.extension().is_some_and(|e| e == "toml") {
        return scenario::load_scenario(path)
            .map(|s| vec![s])
            .map_err(|e| vec![e]);
    }
    let folder = locate::recording_folder(path, || Some(sessions_dir.to_owned()))
        .map_err(|e| vec![BadScenario(e)])?;
    if folder.join(LOG_FILE).exists() {
        let recording = Recording::load(&folder)
            .map_err(|e| vec![BadScenario(format!("{}: {e:#}", folder.display()))])?;
        for warning in &recording.warnings {
            output::err(&format!("livetalk: warning: {warning}"));
        }
        return scenario::from_recording(&recording)
            .map(|s| vec![s])
            .map_err(|e| vec![e]);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(&folder)
        .map_err(|e| {
            vec![BadScenario(format!(
                "{}: cannot read the folder: {e}",
                folder.display()
            ))]
        })?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml") && p.is_file())
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(vec![BadScenario(format!(
            "{} holds neither a recording ({LOG_FILE}) nor scenario files (*.toml)",
            folder.display()
        ))]);
    }
    let (good, bad): (Vec<_>, Vec<_>) = files
        .iter()
        .map(|f| scenario::load_scenario(f))
        .partition(Result::is_ok);
    if bad.is_empty() {
        Ok(good.into_iter().filter_map(Result::ok).collect())
    } else {
        Err(bad.into_iter().filter_map(Result::err).collect())
    }
}

/// The settings of one run: the usual ones, with the recording's model and voice (unless
/// `--model` says otherwise), the scenario's system instruction, no sound devices, and the
/// run's recording folder under `--record`.
fn run_settings(
    flags: &FlagOverrides,
    args: &CheckArgs,
    scenario: &Scenario,
    run: usize,
) -> Result<Settings, crate::config::ConfigError> {
    let mut flags = flags.clone();
    if let Some(recorded) = &scenario.from_recording {
        flags.model = flags.model.or_else(|| Some(recorded.model.clone()));
        flags.voice = flags.voice.or_else(|| Some(recorded.voice.clone()));
    }
    flags.record = args
        .record
        .as_ref()
        .map(|dir| Some(record_folder(dir, scenario, run)));
    let mut settings = Settings::load(&flags)?;
    if let Some(instruction) = &scenario.system_instruction {
        settings.system_instruction = instruction.clone();
    }
    settings.google_search |= scenario.google_search;
    // Spoken turns are sent by the check itself; nothing is heard or played here.
    settings.audio.devices = false;
    settings.audio.input_wav = None;
    settings.audio.output_wav = None;
    settings.audio.push_to_talk = false;
    Ok(settings)
}

/// Where `--record DIR` records run `run` of `scenario`: `DIR/<file>-<n>`.
fn record_folder(dir: &Path, scenario: &Scenario, run: usize) -> PathBuf {
    let stem = scenario
        .source
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "check".into());
    dir.join(format!("{stem}-{run}"))
}

/// `--write-scenario RECORDING [--out FILE]`: the recording as a scenario, printed or
/// written with its spoken turns beside it.
fn write_scenario(given: &Path, out: Option<&Path>, settings: &Settings) -> u8 {
    let scenario = match gather(given, &settings.sessions_dir) {
        Ok(mut found) if found.len() == 1 && found[0].from_recording.is_some() => found.remove(0),
        Ok(_) => {
            output::err(&format!(
                "livetalk: {} is not a recording: --write-scenario takes a recording's folder, its {LOG_FILE} or its name",
                given.display()
            ));
            return UNREADABLE;
        }
        Err(problems) => {
            for BadScenario(problem) in problems {
                output::err(&format!("livetalk: {problem}"));
            }
            return UNREADABLE;
        }
    };
    let Some(out) = out else {
        let stem = scenario.name.clone();
        if scenario
            .turns
            .iter()
            .any(|t| matches!(t.input, Input::Audio { .. }))
        {
            output::err(
                "livetalk: warning: the recording has spoken turns; their audio is written only with --out FILE.toml",
            );
        }
        if scenario.turns.iter().any(|t| t.picture.is_some()) {
            output::err(
                "livetalk: warning: the recording showed the model pictures; they are written only with --out FILE.toml",
            );
        }
        let _ = output::out_raw(&scenario::scenario_text(&scenario, &stem));
        return PASSED;
    };
    let stem = out
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "scenario".into());
    let folder = out.parent().unwrap_or(Path::new("."));
    let mut written = Vec::new();
    let mut pictures = 0;
    for (index, turn) in scenario.turns.iter().enumerate() {
        if let Input::Audio { samples, .. } = &turn.input {
            let path = folder.join(scenario::spoken_file_name(&stem, index + 1));
            if let Err(e) = write_wav(&path, samples) {
                output::err(&format!(
                    "livetalk: error: cannot write {}: {e}",
                    path.display()
                ));
                return FAILED;
            }
            written.push(path);
        }
        if let Some(picture) = &turn.picture {
            let path = folder.join(scenario::picture_file_name(&stem, index + 1, picture));
            if let Err(e) = std::fs::copy(picture, &path) {
                output::err(&format!(
                    "livetalk: error: cannot copy {} to {}: {e}",
                    picture.display(),
                    path.display()
                ));
                return FAILED;
            }
            pictures += 1;
        }
    }
    if let Err(e) = std::fs::write(
        out,
        livetalk_live::redact::scrub(&scenario::scenario_text(&scenario, &stem)).as_bytes(),
    ) {
        output::err(&format!(
            "livetalk: error: cannot write {}: {e}",
            out.display()
        ));
        return FAILED;
    }
    let audio = match (written.len(), pictures) {
        (0, 0) => String::new(),
        (spoken, 0) => format!(" and {spoken} spoken turn(s) beside it"),
        (0, pictures) => format!(" and {pictures} picture(s) beside it"),
        (spoken, pictures) => {
            format!(" and {spoken} spoken turn(s) and {pictures} picture(s) beside it")
        }
    };
    output::err(&format!(
        "livetalk: wrote {} ({} turns){audio}",
        out.display(),
        scenario.turns.len()
    ));
    PASSED
}

fn write_wav(path: &Path, samples: &[i16]) -> anyhow::Result<()> {
    let mut sink = livetalk_live::wav::WavSink::create(path, scenario::SPOKEN_RATE)?;
    let bytes: Vec<u8> = samples.iter().flat_map(|s| s.to_le_bytes()).collect();
    sink.write_pcm16_le(&bytes)?;
    sink.sync()?;
    Ok(())
}
