//! The state records a run keeps as it goes: the step each add-on is at, each success, and
//! every unfinished add-on marked failed when the run stops.

use super::*;

impl Run<'_> {
    pub(super) fn enter_phase(&mut self, index: usize, phase: Step) -> Result<(), EngineError> {
        let member = &mut self.members[index];
        if let Some(attempt) = &mut member.state.attempt {
            attempt.phase = phase;
        }
        let reason = member.planned.decision.progressing_reason();
        member.state.set_progressing(
            true,
            reason,
            format!(
                "{} {}: {phase}",
                member.planned.decision.name(),
                member.planned.version
            ),
        );
        self.store.save(&member.state)?;
        Ok(())
    }

    pub(super) fn succeed(
        &mut self,
        index: usize,
        reporter: &dyn Reporter,
    ) -> Result<(), EngineError> {
        let role = self.role();
        let member = &mut self.members[index];
        let target = member.planned.target.clone();
        let state = &mut member.state;
        if state
            .current
            .as_ref()
            .is_some_and(|current| current.target.version != target.version)
        {
            state.last = state.current.take();
        }
        state.current = Some(Applied {
            target: target.clone(),
            // To the microsecond: reset undoes add-ons in the order they were applied.
            applied_at: humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string(),
            config: member.planned.config.clone(),
            role: Some(role),
            hooks_ran: Some(member.hooks_ran),
            flag_inputs: member.planned.flag_inputs.clone(),
        });
        self.wait_until_healthy(index, reporter)?;
        let member = &mut self.members[index];
        let state = &mut member.state;
        if let Some(attempt) = &mut state.attempt {
            attempt.outcome = Outcome::Succeeded;
        }
        state.set_progressing(
            false,
            Reason::Succeeded,
            format!("{} applied", target.version),
        );
        state.set_available(
            true,
            Reason::Applied,
            format!("{} is in place", target.version),
        );
        self.store.save(state)?;
        member.finished = true;
        reporter.step(&format!(
            "{} {}: succeeded",
            member.planned.name, target.version
        ));
        Ok(())
    }

    /// Waits, up to the run's health timeout, for the add-on's components (its health.yaml)
    /// to make it Available; the version is in place (`current`) while it waits. One that
    /// does not become Available stops the run: it is recorded Failed, naming the components
    /// that are not healthy, and a re-run retries it.
    fn wait_until_healthy(
        &mut self,
        index: usize,
        reporter: &dyn Reporter,
    ) -> Result<(), EngineError> {
        let timeout = self.settings.health_timeout;
        let layout = self.settings.layout.clone();
        let member = &self.members[index];
        let folder = layout.addon_dir(&member.planned.name, &member.planned.version);
        if timeout.is_zero() || !folder.join(berth_formats::health::HEALTH_FILE).is_file() {
            return Ok(());
        }
        self.enter_phase(index, Step::Health)?;
        let member = &self.members[index];
        reporter.step(&format!(
            "{} {}: waiting up to {}s for its components to be healthy",
            member.planned.name,
            member.planned.version,
            timeout.as_secs()
        ));
        let started = Instant::now();
        let runtime = crate::health::RuntimeOnce::new();
        loop {
            check_interrupt()?;
            let member = &self.members[index];
            let record = crate::health::check(&layout, &member.state, &runtime);
            let Some(record) = record else {
                return Ok(());
            };
            if record.available() {
                report_duration(reporter, "becoming healthy", started.elapsed());
                return Ok(());
            }
            if started.elapsed() >= timeout {
                let message = record
                    .condition("Available")
                    .map(|condition| condition.message.clone())
                    .unwrap_or_default();
                return Err(EngineError::Unhealthy {
                    name: member.planned.name.clone(),
                    version: member.planned.version.clone(),
                    seconds: timeout.as_secs(),
                    message,
                });
            }
            let left = timeout.saturating_sub(started.elapsed());
            std::thread::sleep(left.min(Duration::from_secs(1)));
        }
    }

    /// Marks every add-on the run did not finish as Failed: the culprit with the error and the
    /// tail of its output, the others as stopped by it; or, when a signal stopped the run, as
    /// Interrupted at the step it had reached (its hook may have finished: the signal came
    /// between steps). An add-on already in place stays Available.
    pub(super) fn fail_unfinished(&mut self, error: &EngineError) -> Result<(), EngineError> {
        let culprit = match error {
            EngineError::Fetch { name, .. }
            | EngineError::Unpack { name, .. }
            | EngineError::Images { name, .. }
            | EngineError::Hook { name, .. }
            | EngineError::Unhealthy { name, .. }
            | EngineError::NoMainHook { name, .. } => Some(name.clone()),
            _ => None,
        };
        let message = error_message(error);
        for member in &mut self.members {
            if member.finished {
                continue;
            }
            let state = &mut member.state;
            if let Some(attempt) = &mut state.attempt {
                attempt.outcome = Outcome::Failed;
            }
            let is_culprit = culprit.as_deref() == Some(member.planned.name.as_str());
            let (reason, text) = match (crate::interrupt::received(), &culprit) {
                (Some(signal), _) => {
                    let step = state.attempt.as_ref().map(|attempt| attempt.phase);
                    let at = match step {
                        Some(step) => format!(" at its {step} step"),
                        None => String::new(),
                    };
                    let mut text = format!(
                        "interrupted by {}{at}; run the same command again to finish it",
                        signal.as_str()
                    );
                    if is_culprit {
                        text.push('\n');
                        text.push_str(&message);
                    }
                    (Reason::Interrupted, text)
                }
                _ if is_culprit => (Reason::Failed, message.clone()),
                (None, Some(culprit)) => (
                    Reason::Failed,
                    format!("not finished: the run stopped at {culprit}"),
                ),
                (None, None) => (
                    Reason::Failed,
                    format!("not finished: {}", first_line(&message)),
                ),
            };
            state.set_progressing(false, reason, text);
            match &state.current {
                // In place, but not healthy: what the run waited for and did not see.
                Some(current) if is_culprit && matches!(error, EngineError::Unhealthy { .. }) => {
                    let version = current.target.version.clone();
                    state.set_available(
                        false,
                        Reason::Unhealthy,
                        format!("{version} is in place but not healthy"),
                    );
                }
                Some(current) => {
                    let version = current.target.version.clone();
                    state.set_available(true, Reason::Applied, format!("{version} stays in place"));
                }
                None => state.set_available(false, Reason::NotApplied, "not installed".into()),
            }
            self.store.save(state)?;
        }
        Ok(())
    }
}
