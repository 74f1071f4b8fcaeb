# shellcheck shell=bash
# Rendering, kustomization and YAML text helpers with kURL's names and signatures. The insert_*
# edits go through `berth kustomization`, which parses and writes YAML, so they hold for any layout.

# __berth_check_yaml_values FILE: fails when a variable FILE names holds a line break. Spec
# values reach hooks as variables; expanded into YAML, a line break would add keys of its own
# (`x\nhostPID: true`), so such a value is refused instead.
function __berth_check_yaml_values() {
    local name
    for name in $(grep -o '\$[{]\?[A-Za-z_][A-Za-z0-9_]*' "$1" | tr -d '${' | sort -u); do
        # LF, CR, and U+0085, U+2028, U+2029 in UTF-8: YAML reads each as a line break.
        if [[ "${!name-}" == *[$'\n\r']* || "${!name-}" == *$'\xc2\x85'* ||
            "${!name-}" == *$'\xe2\x80\xa8'* || "${!name-}" == *$'\xe2\x80\xa9'* ]]; then
            logFail "\$$name holds a line break, which would change the YAML structure of $1"
            return 1
        fi
    done
}

# render_yaml NAME: prints $DIR/yaml/NAME with its $VARIABLES and $(commands) expanded.
function render_yaml() {
    __berth_check_yaml_values "$DIR/yaml/$1" || return 1
    eval "echo \"$(cat "$DIR/yaml/$1")\""
}

# render_yaml_file FILE: prints FILE with its $VARIABLES and $(commands) expanded (its double
# quotes are consumed, as in kURL).
function render_yaml_file() {
    __berth_check_yaml_values "$1" || return 1
    eval "echo \"$(cat "$1")\""
}

# render_yaml_file_2 FILE: prints FILE with $VARIABLES and $(commands) expanded through a
# here-document, keeping its quotes; fails when FILE is missing.
function render_yaml_file_2() {
    local file="$1"
    if [ ! -f "$file" ]; then
        logFail "File $file does not exist"
        return 1
    fi
    __berth_check_yaml_values "$file" || return 1
    local data
    data=$(<"$file")
    local delimiter="__berth_render_delimiter__"
    eval "cat <<$delimiter"$'\n'"$data"$'\n'"$delimiter"
}

# render_file FILE: kURL's other name for render_yaml_file.
function render_file() {
    render_yaml_file "$@"
}

# insert_resources KUSTOMIZATION ITEM: adds ITEM to the kustomization's resources.
function insert_resources() {
    "$BERTH_BIN" kustomization add "$1" --field resources "$2"
}

# insert_patches_strategic_merge KUSTOMIZATION PATCH: adds PATCH to the kustomization's
# patchesStrategicMerge. As kURL's, it also sets the globals major, minor and patch from the
# installed kubelet's version (empty without one).
function insert_patches_strategic_merge() {
    semverParse "$(kubelet_version)"
    "$BERTH_BIN" kustomization add "$1" --field patchesStrategicMerge "$2"
}

# insert_bases KUSTOMIZATION BASE: adds BASE to the kustomization's resources; kubectl 1.21
# and later read bases as resources, and kustomize v5 drops `bases`; older clients keep
# `bases`, as kURL does.
function insert_bases() {
    local minor=
    if commandExists kubectl; then
        minor="$(kubectl version --client -o json 2>/dev/null | sed -n 's/.*"minor": *"\([0-9]*\).*/\1/p' | head -n 1)"
    elif [ -n "${KUBERNETES_VERSION:-}" ]; then
        semverParse "$KUBERNETES_VERSION"
    fi
    if [ -n "$minor" ] && [ "$minor" -le 20 ]; then
        "$BERTH_BIN" kustomization add "$1" --field bases "$2"
    else
        insert_resources "$1" "$2"
    fi
}

# insert_patches_json_6902 KUSTOMIZATION PATCH GROUP VERSION KIND NAME NAMESPACE: adds a
# patchesJson6902 entry applying PATCH to that resource.
function insert_patches_json_6902() {
    "$BERTH_BIN" kustomization add-json6902 "$1" --path "$2" --group "$3" \
        --version "$4" --kind "$5" --name "$6" --namespace "$7"
}

# yaml_indent INDENT: copies stdin to stdout with INDENT before every line.
function yaml_indent() {
    local indent="$1" line
    while IFS= read -r line || [ -n "$line" ]; do
        printf '%s%s\n' "$indent" "$line"
    done
}

# yaml_escape_string_quotes: copies stdin to stdout with every " escaped as \".
function yaml_escape_string_quotes() {
    sed -e 's/"/\\"/g'
}

# yaml_newline_to_literal: copies stdin to stdout as one line, line breaks written as \n.
function yaml_newline_to_literal() {
    sed -e ':a' -e 'N' -e '$!ba' -e 's/\n/\\n/g'
}

# get_yaml_from_multidoc_yaml FILE NAME: prints each document of the multi-document FILE
# (documents split at `---` lines) that has a `name: NAME` line, each followed by `---`, as
# kURL's does; fails when none has. The name is matched whole (kURL's pattern also matched
# a longer name that begins with NAME), quoted or not.
function get_yaml_from_multidoc_yaml() {
    local file="$1" name="$2"
    awk -v wanted="$name" '
        function flush() {
            if (matched) { printf "%s---\n", document; found = 1 }
            document = ""; matched = 0
        }
        /^---[[:space:]]*$/ { flush(); next }
        {
            document = document $0 "\n"
            line = $0
            sub(/^[[:space:]-]*name:[[:space:]]*/, "", line)
            if (line != $0) {
                sub(/[[:space:]]+(#.*)?$/, "", line)
                gsub(/^["\047]|["\047]$/, "", line)
                if (line == wanted) matched = 1
            }
        }
        END { flush(); exit !found }
    ' "$file"
}
