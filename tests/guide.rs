//! The user guide followed as a new user follows it, off the scripts: each install and CI
//! recipe names the packages `scripts/run.sh` installs, after an `apt-get update`; the install
//! section installs livetalk and its manual page where `man` finds them
//! (`cargo install --path . --locked --root DIR`); the CI recipe's check runs as written; and docs/audio.md's virtual microphone and
//! speaker are made and used as written, with `XDG_RUNTIME_DIR` unset as it is for root and in
//! containers.

// Test output is the test runner's, not livetalk's: it may print directly.
#![allow(clippy::disallowed_macros)]
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;

/// The repository's root (the README, the guide and the scripts live there).
fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn page(name: &str) -> String {
    std::fs::read_to_string(repository().join(name)).unwrap()
}

/// The lines of the first fenced block of `kind` (`sh`, `yaml`) in the section of `page`
/// headed `heading` (up to the next heading of that level or above).
fn block(page_name: &str, heading: &str, kind: &str) -> Vec<String> {
    let text = page(page_name);
    let level = heading.split(' ').next().unwrap();
    let section: Vec<&str> = text
        .lines()
        .skip_while(|line| *line != heading)
        .skip(1)
        .take_while(|line| {
            !(line.starts_with('#')
                && line
                    .split(' ')
                    .next()
                    .is_some_and(|marks| marks.len() <= level.len()))
        })
        .collect();
    assert!(!section.is_empty(), "{heading:?} in {page_name}");
    let lines: Vec<String> = section
        .iter()
        .skip_while(|line| **line != format!("```{kind}"))
        .skip(1)
        .take_while(|line| !line.starts_with("```"))
        .map(|line| (*line).to_owned())
        .collect();
    assert!(
        !lines.is_empty(),
        "a {kind} block under {heading:?} in {page_name}"
    );
    lines
}

/// The packages a shell line (or a YAML `run:` line) installs with `apt-get install`.
fn installed_by(line: &str) -> Option<BTreeSet<String>> {
    let after = line.split("apt-get install").nth(1)?;
    let command = after.split("&&").next().unwrap_or(after);
    Some(
        command
            .split('#')
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .filter(|word| !word.starts_with('-'))
            .map(str::to_owned)
            .collect(),
    )
}

/// What `scripts/NAME` installs through `scripts/setup-system.sh` (its first call).
fn script_packages(name: &str) -> BTreeSet<String> {
    let script = page(&format!("scripts/{name}"));
    let mut words = Vec::new();
    let mut lines = script
        .lines()
        .skip_while(|line| !line.starts_with("scripts/setup-system.sh "));
    for line in lines.by_ref() {
        words.extend(line.split_whitespace().map(str::to_owned));
        if !line.trim_end().ends_with('\\') {
            break;
        }
    }
    words
        .into_iter()
        .skip(1)
        .filter(|word| word != "\\")
        .collect()
}

/// The packages `recipe` installs, checking that it updates the package lists first (a fresh
/// machine's are empty or stale, and `apt-get install` then finds nothing).
fn recipe_packages(recipe: &[String], named: &str) -> BTreeSet<String> {
    let at = recipe
        .iter()
        .position(|line| line.contains("apt-get install"))
        .unwrap_or_else(|| panic!("{named} installs no package: {recipe:#?}"));
    let updated = recipe[..=at].iter().any(|line| {
        line.contains("apt-get update")
            && (!line.contains("apt-get install")
                || line.find("apt-get update") < line.find("apt-get install"))
    });
    assert!(
        updated,
        "{named} runs apt-get install without apt-get update first"
    );
    installed_by(&recipe[at]).unwrap()
}

#[test]
fn every_install_and_ci_recipe_names_the_packages_run_sh_installs() {
    let run_sh = script_packages("run.sh");
    assert!(run_sh.contains("libopus-dev"), "{run_sh:?}");
    for (page_name, heading, kind) in [
        ("README.md", "## Install", "sh"),
        ("docs/configuration.md", "## Install", "sh"),
        ("docs/checking.md", "## In CI", "yaml"),
    ] {
        let recipe = block(page_name, heading, kind);
        let named = format!("{page_name} {heading}");
        assert_eq!(recipe_packages(&recipe, &named), run_sh, "{named}");
    }
    // The README's install is the guide's, line for line.
    assert_eq!(
        block("README.md", "## Install", "sh"),
        block("docs/configuration.md", "## Install", "sh")
    );
    // The virtual devices need the sound server the test rig uses, nothing it lacks.
    let recipe = block(
        "docs/audio.md",
        "## No sound card: text only, or a virtual microphone and speaker",
        "sh",
    );
    let audio = recipe_packages(&recipe, "docs/audio.md's virtual devices");
    let test_sh = script_packages("test.sh");
    assert!(audio.is_subset(&test_sh), "{audio:?} ⊄ {test_sh:?}");
}

/// The CI recipe's agent config and check folder are explained, and its check runs as
/// written against the offline demo model, with the guide's own scenario in `checks/`.
#[test]
fn the_ci_recipes_check_runs_as_written() {
    let recipe = block("docs/checking.md", "## In CI", "yaml");
    let line = recipe
        .iter()
        .find_map(|l| l.trim().strip_prefix("run: livetalk "))
        .expect("the check's run line");
    let checking = page("docs/checking.md").replace('\n', " ");
    for explained in ["`agent.toml`, the config", "`checks/`, the scenario files"] {
        assert!(checking.contains(explained), "{explained}");
    }
    let scratch = tempfile::tempdir().unwrap();
    let checks = scratch.path().join("checks");
    std::fs::create_dir(&checks).unwrap();
    let scenario = block("docs/checking.md", "## A scenario file", "toml").join("\n");
    std::fs::write(checks.join("lamp.toml"), scenario).unwrap();
    std::fs::write(
        scratch.path().join("agent.toml"),
        "system_instruction = \"You are the smart home's voice.\"\n",
    )
    .unwrap();
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!("livetalk {line}"))
        .current_dir(scratch.path());
    isolate(&mut command, scratch.path());
    command.env("PATH", path_with(&built_livetalk_folder()));
    let run = run_command(command, &[], Duration::from_secs(120));
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    let junit = std::fs::read_to_string(scratch.path().join("check-results.xml")).unwrap();
    assert!(junit.contains("<testsuite"), "{junit}");
}

/// The folder holding the livetalk these tests built.
fn built_livetalk_folder() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_livetalk"))
        .parent()
        .unwrap()
        .to_owned()
}

/// The target folder these tests were built in (the livetalk under test is in its profile's
/// folder).
fn tests_target_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_livetalk"))
        .ancestors()
        .nth(2)
        .expect("the target folder above the binary's profile folder")
        .to_owned()
}

/// `folder` first, then the usual system folders (never the test runner's own `PATH`, whose
/// `~/.cargo/bin` would let `man` find a page this test did not install).
fn path_with(folder: &Path) -> String {
    format!("{}:/usr/local/bin:/usr/bin:/bin", folder.display())
}

/// `man` in `home` with `path`, its page text on stdout, no pager.
fn man(home: &Path, path: &str, args: &[&str]) -> Run {
    let mut command = Command::new("man");
    command
        .args(args)
        .env_remove("MANPATH")
        .env("HOME", home)
        .env("PATH", path)
        .env("MANPAGER", "cat")
        .env("PAGER", "cat")
        .env("MANWIDTH", "100")
        .env("LANG", "C.UTF-8");
    run_command(command, &[], Duration::from_secs(60))
}

/// The install section run as written, with `--root DIR` as it says: livetalk lands in
/// `DIR/bin` and `man livetalk` finds the manual page the section installs, with nothing but
/// `DIR/bin` added to the `PATH`. The build is cargo's own, of the locked versions; here it is
/// the development profile's (`--debug`) in the target folder the tests were built in, so it
/// reuses what that build made instead of compiling every crate again (several minutes on a
/// cold two-core CI machine): what is checked is the recipe, not the optimiser.
#[test]
fn the_install_section_installs_livetalk_and_its_manual_page_where_man_finds_them() {
    let recipe = block("docs/configuration.md", "## Install", "sh");
    let install = recipe
        .iter()
        .find(|line| line.starts_with("cargo install "))
        .expect("the cargo install line");
    assert_eq!(install, "cargo install --path . --locked");
    let manual = recipe
        .iter()
        .find(|line| line.contains("livetalk man >"))
        .expect("the manual page's line");
    assert!(manual.contains("~/.cargo/"), "{manual}");

    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().join("root");
    let home = scratch.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut command = Command::new(&cargo);
    command
        .args(install.split_whitespace().skip(1))
        .args(["--debug", "--root"])
        .arg(&root)
        .current_dir(repository())
        .env("CARGO_TARGET_DIR", tests_target_dir())
        .stdin(Stdio::null());
    let run = run_command(command, &[], Duration::from_secs(1800));
    assert_eq!(run.code, Some(0), "{install} --root DIR:\n{}", run.stderr);
    let bin = root.join("bin");
    assert!(bin.join("livetalk").is_file(), "{}", run.stderr);

    // The manual page's line, with the root for ~/.cargo, by the installed livetalk.
    let line = manual.replace("~/.cargo", &root.display().to_string());
    let mut command = Command::new("sh");
    command.arg("-c").arg(&line);
    isolate(&mut command, scratch.path());
    command.env("HOME", &home).env("PATH", path_with(&bin));
    let run = run_command(command, &[], Duration::from_secs(60));
    assert_eq!(run.code, Some(0), "{line}: {}", run.stderr);

    let found = man(&home, &path_with(&bin), &["-w", "livetalk"]);
    assert_eq!(
        found.stdout.trim(),
        root.join("share/man/man1/livetalk.1").display().to_string(),
        "man -w livetalk: {}",
        found.stderr
    );
    let read = man(&home, &path_with(&bin), &["livetalk"]);
    assert_eq!(read.code, Some(0), "{}", read.stderr);
    assert!(read.stdout.contains("LIVETALK DOCTOR"), "{}", read.stdout);
}

/// A process group this test started (its leader): stopped whole, and waited for, when the
/// test ends, however it ends.
struct Group(std::process::Child);

impl Drop for Group {
    fn drop(&mut self) {
        // `--`: procps' kill reads a bare `-PGID` as an option and kills nothing.
        let _ = Command::new("kill")
            .args(["-TERM", "--", &format!("-{}", self.0.id())])
            .status();
        let _ = self.0.wait();
    }
}

/// The PulseAudio server the recipe started with `pulseaudio --start`: stopped as the guide
/// says, `pulseaudio --kill`, with the recipe's environment.
struct Server<'a>(&'a dyn Fn(&str) -> Command);

impl Drop for Server<'_> {
    fn drop(&mut self) {
        let _ = (self.0)("pulseaudio --kill").status();
    }
}

/// docs/audio.md's virtual microphone and speaker, as written, as root or in a container
/// would run them: no `XDG_RUNTIME_DIR` (nor `PULSE_SERVER`), so `pulseaudio --start` puts its
/// socket under the home's `.config/pulse`. livetalk lists the devices, and a spoken session
/// hears the WAV played into the virtual mic and plays its reply on the virtual speaker.
#[test]
fn the_virtual_microphone_and_speaker_work_as_written_without_xdg_runtime_dir() {
    let heading = "## No sound card: text only, or a virtual microphone and speaker";
    let text = page("docs/audio.md");
    let section = &text[text.find(heading).unwrap()..];
    let blocks: Vec<Vec<String>> = section
        .split("```sh\n")
        .skip(1)
        .take(2)
        .map(|b| {
            b.split("```")
                .next()
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect()
        })
        .collect();
    let (setup, session) = (&blocks[0], &blocks[1]);

    let scratch = tempfile::tempdir().unwrap();
    let home = scratch.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    // The config livetalk finds: audio on (the test default is off).
    std::fs::write(scratch.path().join("config.toml"), "").unwrap();
    let shell = |line: &str| {
        let mut command = Command::new("sh");
        command.arg("-c").arg(line).current_dir(scratch.path());
        isolate(&mut command, scratch.path());
        command
            .env("HOME", &home)
            .env("PATH", path_with(&built_livetalk_folder()))
            .env_remove("XDG_RUNTIME_DIR")
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("PULSE_SERVER")
            .env_remove("PULSE_RUNTIME_PATH")
            .env_remove("PULSE_COOKIE")
            .stdin(Stdio::null());
        command
    };
    let run = |line: &str| {
        let run = run_command(shell(line), &[], Duration::from_secs(60));
        assert_eq!(
            run.code,
            Some(0),
            "`{line}`:\n{}\n{}",
            run.stdout,
            run.stderr
        );
        run
    };

    let mut server = None;
    let mut listed = None;
    for line in setup {
        if line.contains("apt-get") {
            continue; // The packages: scripts/test.sh installed them (compared above).
        }
        let done = run(line);
        if line.starts_with("pulseaudio --start") {
            server = Some(Server(&shell));
        }
        if line.starts_with("livetalk devices") {
            listed = Some(done.stdout);
        }
    }
    assert!(server.is_some(), "the recipe starts a server: {setup:#?}");
    let listed = listed.expect("the recipe lists the devices");
    for device in ["spk", "mic.monitor"] {
        assert!(
            listed
                .lines()
                .any(|l| l.contains(device) && l.trim_start().starts_with('*')),
            "{device} listed as the default:\n{listed}"
        );
    }

    // The spoken session: the lines as written, the one that runs livetalk in the
    // background started here (its output read), and the recording of the speaker stopped
    // as Ctrl-C would once the reply was heard.
    let line = |start: &str| {
        session
            .iter()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("a line starting {start:?}: {session:#?}"))
            .split(" #")
            .next()
            .unwrap()
            .trim()
            .to_owned()
    };
    run(&line("espeak-ng -w q.wav"));
    let background = line("sleep infinity | livetalk");
    let foreground = background
        .strip_suffix('&')
        .expect("run in the background")
        .trim();
    let mut livetalk = shell(foreground);
    std::os::unix::process::CommandExt::process_group(&mut livetalk, 0);
    let mut livetalk = livetalk
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut output = LineWatcher::new(livetalk.stdout.take().unwrap());
    let errors = read_all(livetalk.stderr.take().unwrap());
    let session_group = Group(livetalk);
    // Played once livetalk listens: its recording stream is on the server.
    let listening = poll(Duration::from_secs(30), Duration::from_millis(100), || {
        let outputs = run("pactl list short source-outputs").stdout;
        (!outputs.trim().is_empty()).then_some(())
    });
    assert!(listening.is_some(), "livetalk never opened the virtual mic");
    let mut record = shell(&line("parecord --device=spk.monitor"));
    std::os::unix::process::CommandExt::process_group(&mut record, 0);
    let recording = Group(record.spawn().unwrap());
    run(&line("paplay --device=mic q.wav"));
    // The demo model heard speech and answers; its reply plays on the virtual speaker.
    let reply = output.wait_for(Duration::from_secs(60), |l| l.starts_with("Gemini: "));
    let answer = scratch.path().join("answer.wav");
    let heard = poll(Duration::from_secs(30), Duration::from_millis(200), || {
        let wav = std::fs::read(&answer).ok()?;
        wav.get(44..)?
            .chunks_exact(2)
            .any(|s| i16::from_le_bytes([s[0], s[1]]).unsigned_abs() > 1000)
            .then_some(())
    });
    drop(recording);
    drop(session_group);
    let stderr = errors
        .recv_timeout(Duration::from_secs(30))
        .unwrap_or_default();
    assert!(
        heard.is_some(),
        "nothing was played on the virtual speaker ({reply}):\n{stderr}"
    );
    assert!(!stderr.contains("not available"), "{stderr}");
}

/// What the guide says is refused is refused: `--bridge-transport` without `--bridge`, even
/// beside `--offline` or `--endpoint` (which `--bridge` conflicts with).
#[test]
fn bridge_transport_without_a_bridge_is_refused_as_the_guide_says() {
    let configuration = page("docs/configuration.md");
    let row = configuration
        .lines()
        .find(|l| l.starts_with("| `--bridge-transport"))
        .expect("the flag's row");
    assert!(row.ends_with("without `--bridge` it is refused |"), "{row}");
    let scratch = tempfile::tempdir().unwrap();
    for with in [
        vec!["--offline"],
        vec!["--endpoint", "ws://127.0.0.1:9"],
        vec![],
    ] {
        let args = [
            with.clone(),
            vec!["--headless", "--bridge-transport", "webrtc"],
        ]
        .concat();
        let run = run_livetalk(scratch.path(), &args, &[], &[]);
        assert_eq!(
            run.code,
            Some(2),
            "{args:?}: {}\n{}",
            run.stdout,
            run.stderr
        );
        assert!(run.stderr.contains("--bridge"), "{args:?}: {}", run.stderr);
    }
}
