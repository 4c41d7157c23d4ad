#!/bin/sh
# Prints the URI of the Debian archive this system's apt sources use, so
# scripts that add a suite or a component (non-free, trixie, unstable) take
# the site's own mirror or proxy and name no host themselves.
#   sh scripts/debian-mirror.sh            the main archive
#   sh scripts/debian-mirror.sh security   the security archive
# Reads one-line (sources.list, *.list) and deb822 (*.sources) files; the
# first "deb" entry whose suites match wins. Exits 1 with a one-line error
# when none is found.
set -eu
want=${1:-main}
files=$(ls /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
[ -n "$files" ] || { echo "debian-mirror.sh: error: no apt sources in /etc/apt" >&2; exit 1; }
# shellcheck disable=SC2086
uri=$(awk -v want="$want" '
  # Some suite listed is the archive wanted: "X-security", or a plain "X".
  function suite_ok(suites,    n, s, k) {
    n = split(suites, s, /[ \t]+/)
    for (k = 1; k <= n; k++) {
      if (want == "security" && s[k] ~ /-security$/) return 1
      if (want != "security" && s[k] != "" && s[k] !~ /-/) return 1
    }
    return 0
  }
  function flush() {
    if (types ~ /(^| )deb( |$)/ && uris != "" && suite_ok(suites) && found == "") found = uris
    types = ""; uris = ""; suites = ""
  }
  FNR == 1 { flush() }
  FILENAME ~ /\.sources$/ {
    if ($0 ~ /^[ \t]*$/) { flush(); next }
    if ($1 == "Types:") { types = $0; sub(/^Types:[ \t]*/, "", types) }
    if ($1 == "URIs:") uris = $2
    if ($1 == "Suites:") { suites = $0; sub(/^Suites:[ \t]*/, "", suites) }
    next
  }
  { flush() }
  $1 == "deb" {
    i = 2
    if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
    if (suite_ok($(i + 1)) && found == "") found = $i
  }
  END { flush(); print found }
' $files 2>/dev/null || true)
[ -n "$uri" ] || { echo "debian-mirror.sh: error: no Debian '$want' archive in /etc/apt's sources: add one, or set the mirror there" >&2; exit 1; }
echo "${uri%/}"
