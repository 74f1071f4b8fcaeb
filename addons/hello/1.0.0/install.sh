# shellcheck shell=bash
# Hooks are bash functions named after the add-on, as in kURL.

function hello() {
    local dir="$DIR/addons/hello/1.0.0"
    logStep "Installing hello"
    cat "$dir/assets/hello.conf"
    logSuccess "hello installed"
}
