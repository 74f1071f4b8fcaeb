# shellcheck shell=bash
# Logging helpers with kURL's names. Messages go to stderr, so a hook's stdout stays its data.

GREEN='\033[0;32m'
BLUE='\033[0;94m'
LIGHT_BLUE='\033[0;34m'
YELLOW='\033[0;33m'
RED='\033[0;31m'
NC='\033[0m'

function logStep() {
    printf "${BLUE}⚙  %s${NC}\n" "$1" 1>&2
}

function logSubstep() {
    printf "\t${LIGHT_BLUE}- %s${NC}\n" "$1" 1>&2
}

function logSuccess() {
    printf "${GREEN}✔ %s${NC}\n" "$1" 1>&2
}

function logWarn() {
    printf "${YELLOW}%s${NC}\n" "$1" 1>&2
}

function logFail() {
    printf "${RED}%s${NC}\n" "$1" 1>&2
}

# Prints the message and ends the whole install: berth marks the add-on Failed with it.
function bail() {
    logFail "$*"
    exit 1
}
