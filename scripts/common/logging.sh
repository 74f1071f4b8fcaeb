# shellcheck shell=bash
# Logging helpers with kURL's names, output and colours: add-ons call them for every message.
# As in kURL, messages go to stderr (a hook's stdout stays its data) and bail ends the install.

# kURL's colour variables, which add-ons also use in their own printf formats. They hold escape
# sequences only when stdout is a terminal (or BERTH_COLOR=1): a hook's output goes to a log;
# and never under NO_COLOR (no-color.org), whatever else says.
if [ -z "${NO_COLOR:-}" ] && { [ -t 1 ] || [ "${BERTH_COLOR:-}" = "1" ]; }; then
    GREEN='\033[0;32m'
    BLUE='\033[0;94m'
    LIGHT_BLUE='\033[0;34m'
    YELLOW='\033[0;33m'
    RED='\033[0;31m'
    NC='\033[0m'
else
    GREEN=''
    BLUE=''
    LIGHT_BLUE=''
    YELLOW=''
    RED=''
    NC=''
fi

# __berth_log_format PREFIX FORMAT: prints PREFIX, FORMAT used as printf's format (as kURL does:
# "\n" breaks the line, "%%" prints "%"), a colour reset and a newline, on stderr. A FORMAT
# printf rejects (a stray %) is printed as it is instead of cut short, and never fails the caller.
function __berth_log_format() {
    local text
    # shellcheck disable=SC2059 # the message is the format, as in kURL
    if printf -v text "$1$2${NC}" 2>/dev/null; then
        printf '%s\n' "$text" 1>&2
    else
        printf "$1%s${NC}\n" "$2" 1>&2 || true
    fi
}

# log MESSAGE: prints MESSAGE as it is (no format, no colour) on stderr.
function log() {
    printf '%s\n' "${1:-}" 1>&2
}

# logStep FORMAT: prints a step heading, blue with a gear, on stderr.
function logStep() {
    __berth_log_format "${BLUE}⚙  " "${1:-}"
}

# logSubstep FORMAT: prints an indented sub-step line, light blue, on stderr.
function logSubstep() {
    __berth_log_format "\t${LIGHT_BLUE}- " "${1:-}"
}

# logSuccess FORMAT: prints a success line, green with a check mark, on stderr.
function logSuccess() {
    __berth_log_format "${GREEN}✔ " "${1:-}"
}

# logWarn FORMAT: prints a warning line, yellow, on stderr.
function logWarn() {
    __berth_log_format "${YELLOW}" "${1:-}"
}

# logFail FORMAT: prints an error line, red, on stderr.
function logFail() {
    __berth_log_format "${RED}" "${1:-}"
}

# bail FORMAT: prints FORMAT as logFail does (only the first argument, as kURL) and exits 1;
# Berth marks the add-on Failed with the message.
function bail() {
    logFail "${1:-}"
    exit 1
}
