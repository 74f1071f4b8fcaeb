//! Whether the system clock is synchronized, as systemd's timedated decides it (its
//! `NTPSynchronized`): the kernel's maximum error of the clock is under 16 seconds. An NTP
//! daemon (timesyncd, chrony, ntpd) lowers it each time it disciplines the clock; the kernel
//! raises it as time passes without one, up to 16 s.

/// The kernel's limit on the maximum error: at it the clock is unsynchronized.
const UNSYNCHRONIZED_MICROSECONDS: i64 = 16_000_000;

/// Whether the clock is synchronized; `false` where the kernel does not say.
pub fn synchronized() -> bool {
    maximum_error_microseconds().is_some_and(|error| error < UNSYNCHRONIZED_MICROSECONDS)
}

/// The kernel's maximum error of the clock, from `adjtimex` with no change asked for.
// The one call Berth makes that nix does not wrap: a read of the kernel's clock state into a
// zeroed struct the call owns for its duration (modes 0 asks for no change).
#[allow(unsafe_code)]
fn maximum_error_microseconds() -> Option<i64> {
    // SAFETY: `timex` is plain data, valid when zeroed; adjtimex writes only into it.
    let mut state: nix::libc::timex = unsafe { std::mem::zeroed() };
    state.modes = 0;
    // SAFETY: a valid pointer to a `timex` that lives across the call.
    let result = unsafe { nix::libc::adjtimex(&mut state) };
    // `c_long`: the same as i64 on 64-bit hosts, narrower elsewhere.
    #[allow(clippy::useless_conversion)]
    let maximum_error = i64::from(state.maxerror);
    (result >= 0).then_some(maximum_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_answers_within_its_bounds() {
        let error = maximum_error_microseconds().expect("adjtimex reads without privileges");
        assert!(
            (0..=UNSYNCHRONIZED_MICROSECONDS).contains(&error),
            "{error}"
        );
    }
}
