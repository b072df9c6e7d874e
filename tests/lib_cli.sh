# Shared by the tests/cli_*.sh scripts (sourced, not run): a scratch directory removed on exit, pass/fail
# counters, `run`, which checks a vdnn command's exit code and the messages on its stderr, `json_get` and `same`.
# The sourcing script sets VDNN first.
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
passed=0
failed=0

ok() { passed=$((passed + 1)); }
bad() {
    failed=$((failed + 1))
    echo "FAIL: $*" >&2
}

# run NAME EXPECTED_EXIT NEEDLE... -- ARGS: runs vdnn ARGS, checks the exit code and that stderr holds
# every needle.
run() {
    local name=$1 want=$2
    shift 2
    local needles=()
    while [ "$1" != "--" ]; do
        needles+=("$1")
        shift
    done
    shift
    "$VDNN" "$@" >"$TMP/out" 2>"$TMP/err"
    local got=$?
    if [ "$got" != "$want" ]; then
        bad "$name: exit $got, want $want ($(head -c 400 "$TMP/err"))"
        return
    fi
    local n
    for n in "${needles[@]}"; do
        if ! grep -qF -- "$n" "$TMP/err"; then
            bad "$name: stderr lacks '$n': $(head -c 400 "$TMP/err")"
            return
        fi
    done
    ok
}

# json_get FILE KEY: a top-level value of a JSON file (lists, objects and booleans as JSON).
json_get() {
    python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))[sys.argv[2]]; print(json.dumps(v) if isinstance(v,(bool,list,dict)) or v is None else v)' "$1" "$2"
}

# same NAME FILE FILE: passes if the two files are byte for byte equal.
same() {
    if cmp -s "$2" "$3"; then ok; else bad "$1: $2 and $3 differ"; fi
}
