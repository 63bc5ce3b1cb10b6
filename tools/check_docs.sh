#!/usr/bin/env bash
# Keeps the docs true. Every shell command in a fenced block of README.md or
# docs/*.md, and every inline code span that is a command (below), must have
# a record in docs/commands.txt that says how it is exercised, and the record
# is checked:
#   run      this script runs it here, on the CPU, and checks its exit status
#            (and output, where the record says what the docs promise);
#   fails    this script runs it and checks that it fails with the text shown;
#   device   GPU-only: a named script carried to the GPU machine
#            (tools/device/*.sh, bench/*.sh) must contain it;
#   script   it starts a device script itself: the script must exist, parse
#            and, for .device/ paths, be carried by tools/device/bundle.sh;
#   ci       CI runs it: .ci/run, a script .ci/run runs, or a script that a
#            `run` record starts (CI runs this check) contains it;
#   abbreviates $ FULL
#            inline code only: it shortens FULL (`...`, placeholders such as
#            N or <target>, a bare binary name, a fragment of FULL's script),
#            FULL has a run, fails, device, script or ci record, and every
#            other word of it is a word of FULL or of the script FULL starts.
# An inline code span is a command when, after any VAR=VALUE words, it starts
# with: `bazel ` (or `timeout N bazel `); mpirun, torchrun, python3, bash or
# sh followed by an option or a file; sudo; the path of a binary or file
# under bazel-bin/, bazel-out/, .device/, bin/ or ./ (not a folder: no
# trailing /); a tools/ or bench/ .sh script, or .ci/run; $DIR/binary with
# an argument; a Tandem binary by name (fashion_mnist, custom_layer, *_bench,
# *_fuzzer) followed by an option; `... -` (a command with its start elided);
# or it is a pipeline (`word ... | word`). So a flag (`--workers`), a target
# (`//bench:dp_cpu_bench`), a source path (`parallel/reducer.h`), a folder
# (`bench/`) or a bare tool name (`mpirun`, `nvidia-smi`) is not a command.
# C++ blocks need a record too: `source` (copied from a file Bazel compiles;
# checked line by line, in order) or `sketch` (illustrative, with a reason).
# A command or block without a record, a record that no doc shows any more,
# and a doc command that fails, each fail the check naming file and line.
#
#   tools/check_docs.sh             check the records, then run the CPU commands
#   tools/check_docs.sh --static    check the records only; runs nothing (what
#                                   //tests/tools:check_docs_test does, in < 1 s)
#   tools/check_docs.sh --list      every command (inline ones too) and C++ block
#                                   with its record
#   tools/check_docs.sh --only ERE  run only the commands matching ERE
#   tools/check_docs.sh --slow      also run the records marked `slow`
#
# tools/test.sh (so CI) runs it after `bazel test //...`. The record format is
# at the top of docs/commands.txt; docs/architecture.md ("Docs stay true")
# says how to add a command. Logs of the commands run go to $DOCS_LOG_DIR
# (default: a temporary folder, removed at the end).
set -uo pipefail
# Under `bazel test` (tests/tools:check_docs_test) the files are runfiles.
if [ -n "${TEST_SRCDIR:-}" ]; then cd "$TEST_SRCDIR/$TEST_WORKSPACE"; else cd "$(dirname "$0")/.."; fi

mode=all only="" slow=0
while [ $# -gt 0 ]; do
  case "$1" in
    --static) mode=static ;;
    --list) mode=list ;;
    --only) only=${2:?--only needs an ERE}; shift ;;
    --slow) slow=1 ;;
    *) echo "usage: tools/check_docs.sh [--static | --list | --only ERE | --slow]" >&2; exit 2 ;;
  esac
  shift
done

manifest=docs/commands.txt
docs=(README.md docs/*.md)
work=$(mktemp -d "${TMPDIR:-/tmp}/check_docs.XXXXXX")
trap 'rm -rf "$work"' EXIT
errors=0
err() { echo "$*" >&2; errors=$((errors + 1)); }
# Under `bazel test`, a file a record names is there only if it is in `data`.
hint=""
[ -n "${TEST_SRCDIR:-}" ] && hint=" (is it in data of tests/tools:check_docs_test?)"

# --- The docs' fenced blocks and inline commands --------------------------------
# One line per item, tab-separated: `sh FILE LINE COMMAND` (comments dropped,
# `\` continuations joined, blanks squeezed), `inline FILE LINE COMMAND` (a
# code span of running text or a table row that is a command, blanks
# squeezed; LINE is where it starts), `cpp FILE LINE FIRST-LINE BODY`
# (BODY: a file holding the block), `suspect FILE LINE TEXT` (a line of an
# untagged or `text` block that looks like a command) or `error FILE LINE TEXT`.
extract() {
  perl -e '
    use strict; use warnings;
    my $out = shift @ARGV;
    my $n = 0;
    sub squeeze { my $s = shift; $s =~ s/\s+/ /g; $s =~ s/^ //; $s =~ s/ $//; return $s }
    sub uncomment {  # drops an unquoted "#" that starts a word, and the rest
      my $s = shift; my $q = "";
      for (my $i = 0; $i < length $s; $i++) {
        my $c = substr($s, $i, 1);
        if ($q ne "") { $i++ if $c eq "\\" && $q eq "\""; $q = "" if $c eq $q; next }
        if ($c eq "\\") { $i++; next }
        if ($c eq "\"" || $c eq "\x27") { $q = $c; next }
        return substr($s, 0, $i) if $c eq "#" && ($i == 0 || substr($s, $i - 1, 1) =~ /\s/);
      }
      return $s;
    }
    # A line of an untagged block that a reader would type.
    my $looks = qr{^(?:\$\s|(?:timeout\s+\d+\s+)?bazel\s|mpirun\s|(?:bash|sh|python3?|sudo|apt-get|cp|cd)\s
                   |\S+\.(?:sh|py)(?:\s|$)|(?:\./|\.device/|bazel-bin/|bazel-out/|/tmp/)\S)}x;
    # An inline code span that is a command (the header says why these):
    # VAR=VALUE assignments, then one of the alternatives below.
    my $command = qr{^(?:[A-Z_][A-Z0-9_]*=\S*\s+)*
      (?:(?:timeout\s+\d+\s+)?bazel\s+\S                        # bazel run, bazel --output_base=...
       |(?:mpirun|torchrun|python3?|bash|sh)\s+(?:-|\S*[./])    # a launcher: an option or a file
       |sudo\s+\S
       |(?:bazel-bin|bazel-out|\.device|bin|\.)/\S*[^/\s](?:\s|$)  # a built binary (not a folder)
       |(?:tools|bench)/\S+\.sh(?:\s|$)|\.ci/run(?:\s|$)         # a script
       |\$\{?\w+\}?/\S+\s+\S                                     # $DIR/binary ARGS
       |\w*(?:fashion_mnist|custom_layer|_bench|_fuzzer)\s+-     # a Tandem binary by name, with flags
       |\.\.\.\s+-                                               # "... --flag": a command elided
       |[\w.+-]+(?:\s+[^|\s]+)*\s+\|\s+\w)                       # a pipeline
    }x;
    # The code spans of a paragraph ([LINE, TEXT] pairs) that are commands.
    sub spans {
      my $file = shift;
      my ($text, @at) = ("");
      for my $p (@_) { push @at, [length $text, $p->[0]]; $text .= "$p->[1]\n" }
      while ($text =~ /(?<!`)(`+)(?!`)/g) {
        my $n = length $1;
        my $open = pos($text) - $n;
        if ($text !~ /\G(.*?)(?<!`)`{$n}(?!`)/gcs) { pos($text) = $open + $n; next }
        my $span = $1;
        $span =~ s/\n/ /g;
        $span =~ s/^ (.*\S.*) $/$1/;
        $span = squeeze($span);
        my ($line) = map { $_->[1] } grep { $_->[0] <= $open } reverse @at;
        print "inline\t$file\t$line\t$span\n" if $span =~ $command;
      }
    }
    for my $file (@ARGV) {
      open(my $fh, "<", $file) or die "$file: $!";
      my ($fence, $lang, $start, @body) = ("", "", 0);
      my @para;  # running text: a paragraph, or a table row
      while (my $line = <$fh>) {
        chomp $line;
        if ($fence eq "") {
          if ($line =~ /^ {0,3}(`{3,}|~{3,})\s*([^\s`]*)/) {
            spans($file, @para); @para = ();
            ($fence, $lang, $start, @body) = ($1, lc $2, $., ());
          } elsif ($line =~ /^\s*$/) {
            spans($file, @para); @para = ();
          } elsif ($line =~ /^\s*\|/) {
            spans($file, @para); @para = ();
            spans($file, [$., $line]);
          } else {
            push @para, [$., $line];
          }
          next;
        }
        if ($line =~ /^ {0,3}(`{3,}|~{3,})\s*$/ && substr($1, 0, 1) eq substr($fence, 0, 1)
            && length $1 >= length $fence) {
          if ($lang =~ /^(?:sh|bash|shell|console)$/) {
            my ($cmd, $at) = ("", 0);
            for my $i (0 .. $#body) {
              my $l = $body[$i];
              if ($lang eq "console") {  # "$ " starts a command, "> " continues one
                if ($cmd ne "") { $l =~ s/^\s*>\s?// } else { next unless $l =~ s/^\s*\$\s+// }
              }
              $l = uncomment($l);
              $at = $start + 1 + $i if $cmd eq "";
              if ($l =~ s/\\\s*$//) { $cmd .= "$l "; next }
              $cmd = squeeze($cmd . $l);
              print "sh\t$file\t$at\t$cmd\n" if $cmd ne "";
              $cmd = "";
            }
            print "error\t$file\t$at\ta continuation line ends the block\n" if $cmd ne "";
          } elsif ($lang =~ /^(?:cpp|c\+\+|cc|cxx|c)$/) {
            my ($first) = grep { /\S/ } @body;
            $n++;
            open(my $b, ">", "$out/cpp$n") or die "$out/cpp$n: $!";
            print $b map { "$_\n" } @body;
            close $b;
            print "cpp\t$file\t$start\t" . squeeze($first // "") . "\t$out/cpp$n\n";
          } elsif ($lang eq "" || $lang eq "text") {
            for my $i (0 .. $#body) {
              my $l = $body[$i]; $l =~ s/^\s+//;
              print "suspect\t$file\t" . ($start + 1 + $i) . "\t$l\n" if $l =~ $looks;
            }
          }
          $fence = "";
          next;
        }
        push @body, $line;
      }
      print "error\t$file\t$start\tthe code block opened here is never closed\n" if $fence ne "";
      spans($file, @para);
    }
  ' "$work" "$@"
}

# --- The manifest --------------------------------------------------------------
# rec_key[i]: the command (or "cpp FILE: FIRST LINE"); rec_line[i]: its line
# in the manifest; rec_dirs[i]: its directives, one a line.
declare -a rec_key rec_line rec_dirs rec_where rec_body
declare -A rec_of
nrec=0 lineno=0
# Sets $squeezed to its arguments with blanks squeezed (no subshell: the
# manifest has hundreds of lines).
squeeze() { local -a words; read -ra words <<< "$*"; squeezed="${words[*]}"; }
while IFS= read -r raw || [ -n "$raw" ]; do
  lineno=$((lineno + 1))
  case "$raw" in
    '' | '#'*) continue ;;
    '$ '* | 'cpp '*)
      nrec=$((nrec + 1))
      if [ "${raw:0:2}" = '$ ' ]; then squeeze "${raw:2}"; else squeeze "$raw"; fi
      key=$squeezed
      rec_key[nrec]=$key rec_line[nrec]=$lineno rec_dirs[nrec]="" rec_where[nrec]=""
      if [ -n "${rec_of[$key]:-}" ]; then
        err "$manifest:$lineno: duplicate record (first at line ${rec_line[${rec_of[$key]}]}): $key"
      fi
      rec_of[$key]=$nrec ;;
    ' '* | $'\t'*)
      squeeze "$raw"; d=$squeezed
      case "$d" in '#'*) continue ;; esac
      if [ $nrec = 0 ]; then err "$manifest:$lineno: a directive before any record"; continue; fi
      rec_dirs[nrec]+="$d"$'\n' ;;
    *) err "$manifest:$lineno: expected '\$ COMMAND', 'cpp FILE: FIRST LINE' or an indented directive" ;;
  esac
done < "$manifest"

# --- Every command and block has a record ----------------------------------------
extract "${docs[@]}" > "$work/items" || { echo "check_docs: cannot read the docs" >&2; exit 1; }
ncmd=0 ninline=0 ncpp=0
declare -a rec_block  # 1 where a code block shows the command
while IFS=$'\t' read -r kind file line text body; do
  case "$kind" in
    sh) key=$text; ncmd=$((ncmd + 1)) ;;
    inline) key=$text; ninline=$((ninline + 1)) ;;
    cpp) key="cpp $file: $text"; ncpp=$((ncpp + 1)) ;;
    suspect) err "$file:$line: this looks like a command in an untagged code block; fence it as \`\`\`sh and add it to $manifest: $text"; continue ;;
    *) err "$file:$line: $text"; continue ;;
  esac
  i=${rec_of[$key]:-}
  if [ "$mode" = list ]; then
    printf '%s:%s\t%s\t%s\n' "$file" "$line" "$([ -n "$i" ] && echo "$manifest:${rec_line[i]}" || echo "NO RECORD")" "$key"
  fi
  if [ -z "$i" ] && [ "$mode" != list ]; then
    if [ "$kind" = sh ]; then
      err "$file:$line: this command has no record in $manifest: $text"
    elif [ "$kind" = inline ]; then
      err "$file:$line: this command in inline code has no record in $manifest: $text"
    else
      err "$file:$line: this C++ block has no record in $manifest; add one starting: $key"
    fi
    continue
  fi
  [ -z "$i" ] && continue
  rec_where[i]+="$file:$line "
  [ "$kind" = sh ] && rec_block[i]=1
  [ "$kind" = cpp ] && rec_body[i]=$body
done < "$work/items"
[ "$mode" = list ] && exit 0

# --- Checks that need no run -------------------------------------------------------
# Binary paths as the docs write them and as the device scripts do, made one:
#   bazel run [-c opt] //pkg:name [--]   bazel-bin/pkg/name   bazel-out/*/bin/pkg/name
#   .device/bin/pkg__name   bin/pkg__name   $here/bin/pkg__name     -> @pkg__name
# and the bundle's folder (.device/ from the repository root, ./ or $here/ in
# a script that runs inside it) dropped; mpirun's `-x VAR` (it forwards the
# environment) dropped; quotes dropped, blanks squeezed.
normalize() {  # stdin -> stdout; VAR=VALUE arguments are substituted for $VAR first
  perl -e '
    my %var = map { /^(\w+)=(.*)$/ ? ($1, $2) : () } @ARGV;
    while (my $l = <STDIN>) {
      for my $v (keys %var) { $l =~ s/\$\{$v\}|\$$v\b/$var{$v}/g }
      $l =~ s/["\x27]//g;
      $l =~ s{\bbazel run(?: -c \w+)? //([\w/]+):(\w+)(?: --(?=\s|$))?}{"@" . ($1 =~ s#/#_#gr) . "__$2"}ge;
      $l =~ s{(?<![\w./-])(?:bazel-bin|bazel-out/[\w-]+/bin)/([\w/]+)/(\w+)}{"@" . ($1 =~ s#/#_#gr) . "__$2"}ge;
      $l =~ s{(?<![\w-])(?:[^\s=]*/)?bin/(\w+?__\w+)}{\@$1}g;
      $l =~ s{(^|[\s=])(?:\.device/|\$\{?here\}?/|\./)}{$1}g;
      $l =~ s{\s-x\s+[A-Za-z_]\w*(?:=\S*)?(?=\s|$)}{}g;  # mpirun -x VAR: environment plumbing
      $l =~ s/\s+/ /g; $l =~ s/^ //; $l =~ s/ $//;
      print "$l\n";
    }
  ' "$@"
}
# A script as logical lines: comments dropped, `\` continuations joined.
logical_lines() {
  perl -ne 's/(^|\s)#.*$//; chomp; if (s/\\\s*$//) { $acc .= "$_ "; next } print "$acc$_\n"; $acc = ""' "$1"
}
# Does FILE (a script; VAR=VALUE bindings after it) contain the command?
script_contains() {  # command file [VAR=VALUE...]
  local cmd=$1 file=$2; shift 2
  local want; want=$(printf '%s\n' "$cmd" | normalize)
  logical_lines "$file" | normalize "$@" | sed 's/.*/ & /' | grep -F -- " $want " > /dev/null
}
# Is a script carried to the GPU machine by tools/device/bundle.sh?
carried() {
  grep -qF -- "$1" tools/device/bundle.sh || grep -qF -- "$(dirname "$1")/*.sh" tools/device/bundle.sh
}
# The C++ block's lines, less blank ones and "..." elisions, appear in the
# files in order.
block_in_sources() {  # body where file...
  perl -e '
    my ($body, $where, @files) = @ARGV;
    my ($doc, $start) = $where =~ /^(.*):(\d+)$/;
    my @src;
    for my $f (@files) { open(my $h, "<", $f) or die "$f: $!"; push @src, map { s/^\s+|\s+$//gr } <$h> }
    open(my $b, "<", $body) or die; my @block = <$b>;
    my $at = 0;
    for my $i (0 .. $#block) {
      (my $l = $block[$i]) =~ s/^\s+|\s+$//g;
      next if $l eq "" || $l eq "..." || $l =~ m{^// \.\.\.};
      $at++ while $at < @src && $src[$at] ne $l;
      if ($at == @src) {
        print "$doc:" . ($start + 1 + $i) . ": not in " . join(" + ", @files) . " (in this order): $l\n";
        exit 1;
      }
      $at++;
    }
  ' "$@"
}
# A source file is compiled if the BUILD file of its package names it.
compiled() {
  local dir rel=$1
  dir=$(dirname "$1")
  while [ "$dir" != . ] && [ ! -f "$dir/BUILD" ]; do dir=$(dirname "$dir"); done
  [ -f "$dir/BUILD" ] && grep -qF -- "\"${1#"$dir"/}\"" "$dir/BUILD"
}

# The script a .device/ path stands for: the carried tools/device/ or bench/
# script of that name (nothing if none); any other path as it is.
device_source() {
  local path=$1 dir
  if [[ "$path" != .device/* ]]; then echo "$path"; return; fi
  for dir in tools/device bench; do
    [ -f "$dir/${path#.device/}" ] && carried "$dir/${path#.device/}" && echo "$dir/${path#.device/}" && return
  done
}
# Each record's kind (its first kind directive) and whether it is `slow`.
declare -a rec_how rec_slow
for ((i = 1; i <= nrec; i++)); do
  rec_how[i]="" rec_slow[i]=0
  while read -r word rest; do
    case "$word" in
      run | fails | device | script | ci | abbreviates | source | sketch)
        [ -z "${rec_how[i]}" ] && rec_how[i]=$word ;;
      slow) rec_slow[i]=1 ;;
    esac
  done <<< "${rec_dirs[i]}"
done
# Does a `run` record that CI runs (not `slow`) start the script?
run_here() {  # script
  local j
  for ((j = 1; j <= nrec; j++)); do
    [ "${rec_how[j]}" = run ] && [ "${rec_slow[j]}" = 0 ] || continue
    [ "$(grep -oE '[^ ]+\.sh' <<< "${rec_key[j]}" | head -n 1)" = "$1" ] && return 0
  done
  return 1
}
# An abbreviation fits the command it abbreviates: each of its words, less
# `...`, `[OPTIONAL]` words and placeholders (N, FILE, <name>, the N of
# --flag=N), occurs as a word (blank- or =-delimited) in the full command or
# in the script that the full command starts, both normalized; a binary's
# bare name matches its path (fashion_mnist: bazel-bin/examples/fashion_mnist).
abbreviation_fits() {  # abbreviation full-command
  local src
  src=$(device_source "$(grep -oE '[^ ]+\.sh' <<< "$2" | head -n 1)")
  { printf '%s\n' "$2"; if [ -n "$src" ] && [ -f "$src" ]; then logical_lines "$src"; fi; } | normalize |
    perl -e '
      my $abbr = shift;
      my $hay = " " . join(" ", map { chomp; $_ } <STDIN>) . " ";
      for my $word (split / /, $abbr) {
        next if $word eq "..." || $word =~ /^(?:\[.*\]|<[^>]*>|[A-Z][A-Z0-9_]*)$/;
        (my $w = $word) =~ s/=[A-Z][A-Z0-9_]*$/=/;
        my $re = join "", map { /^<[^>]*>$/ ? "[^\\s/]+" : quotemeta } split /(<[^>]*>)/, $w;
        $re .= "\\S+" if $w ne $word;
        $re = "(?:\@\\w+__)?$re" if $word =~ /^\w+$/;
        next if $hay =~ /(?<=[\s=])$re(?=[\s=])/;
        print "\"$word\" is not a word of the command it abbreviates" . ($ARGV[0] ? " or of $ARGV[0]" : "") . "\n";
        exit 1;
      }
    ' "$(printf '%s\n' "$1" | normalize)" "$src"
}

declare -a run_list
nrun=0 ndevice=0 nscript=0 nci=0 nabbrev=0 nsource=0 nsketch=0 nslow=0
for ((i = 1; i <= nrec; i++)); do
  key=${rec_key[i]} at="$manifest:${rec_line[i]}"
  if [ -z "${rec_where[i]}" ]; then
    err "$at: no doc shows this any more (update or delete the record): $key"
    continue
  fi
  how="" ok_dirs=""
  while read -r word rest; do
    [ -z "$word" ] && continue
    case "$word" in
      run | fails | device | script | ci | abbreviates | source | sketch)
        [ -n "$how" ] && err "$at: '$how' and '$word' in one record"
        how=$word ;;
      expect | last | reject | sub | timeout | slow | smoke) ok_dirs+="$word " ;;
      *) err "$at: unknown directive '$word'" ;;
    esac
  done <<< "${rec_dirs[i]}"
  case "$key" in
    'cpp '*) [[ "$how" =~ ^(source|sketch)$ ]] || err "$at: a C++ block needs 'source FILE...' or 'sketch REASON'" ;;
    *) [[ "$how" =~ ^(run|fails|device|script|ci|abbreviates)$ ]] ||
         err "$at: a command needs run, fails, device, script, ci or abbreviates" ;;
  esac
  if [ -n "$ok_dirs" ] && [[ ! "$how" =~ ^(run|fails)$ ]]; then
    err "$at: expect, last, reject, sub, timeout, slow and smoke go with run or fails only"
  fi
  args=""  # what follows the kind directive
  while IFS= read -r d; do
    if [[ -n "$how" && ( "$d" == "$how" || "$d" == "$how "* ) ]]; then args=${d#"$how"}; args=${args# }; break; fi
  done <<< "${rec_dirs[i]}"
  case "$how" in
    run | fails)
      while IFS= read -r d; do
        case "$d" in
          'sub '*)
            old=${d#sub }; old=${old%% => *}
            [[ "$d" == *' => '* ]] || err "$at: write 'sub OLD => NEW'"
            [[ "$key" == *"$old"* ]] || err "$at: 'sub $old' does not occur in the command" ;;
        esac
      done <<< "${rec_dirs[i]}"
      [ "$how" = fails ] && [ -z "$args" ] && err "$at: write 'fails TEXT' (the text the docs show)"
      [ "${rec_slow[i]}" = 1 ] && nslow=$((nslow + 1))
      run_list+=("$i") ;;
    device)
      read -r script bindings <<< "$args"
      if [ -z "$script" ] || [ ! -f "$script" ]; then
        err "$at: 'device SCRIPT': no such script '$script'$hint"
      elif ! carried "$script"; then
        err "$at: $script is not carried to the GPU machine by tools/device/bundle.sh"
      elif ! script_contains "$key" "$script" $bindings; then
        err "$at: $script does not run this command (compared as: $(printf '%s\n' "$key" | normalize))"
      fi
      ndevice=$((ndevice + 1)) ;;
    script)
      path=$(grep -oE '[^ ]+\.sh' <<< "$key" | head -n 1)
      if [ -z "$path" ]; then
        err "$at: 'script': the command names no .sh file"
      else
        src=$(device_source "$path")
        [ -n "$src" ] || err "$at: no carried script becomes $path (tools/device/bundle.sh copies them)"
        path=$src
        if [ -n "$path" ]; then
          if [ ! -f "$path" ]; then err "$at: no such script: $path$hint"
          elif ! bash -n "$path"; then err "$at: $path does not parse"
          fi
        fi
      fi
      nscript=$((nscript + 1)) ;;
    ci)
      file=${args:-.ci/run}
      if [ ! -f "$file" ]; then
        err "$at: no such file: $file$hint"
      elif [ "$key" = .ci/run ] && [ "$file" = .ci/run ]; then
        :  # CI's entry point itself
      elif [ "$file" != .ci/run ] && ! script_contains "$file" .ci/run && ! run_here "$file"; then
        err "$at: $file is run neither by .ci/run nor by a run record of $manifest that CI runs"
      elif ! script_contains "$key" "$file"; then
        err "$at: $file does not run this command"
      fi
      nci=$((nci + 1)) ;;
    abbreviates)
      full=${args#'$ '}
      j=${rec_of[$full]:-}
      if [[ "$args" != '$ '* ]]; then
        err "$at: write 'abbreviates \$ FULL COMMAND' (the full command as its record starts)"
      elif [ -n "${rec_block[i]:-}" ]; then
        err "$at: a code block shows this command, so a reader copies it: it cannot be an abbreviation"
      elif [ -z "$j" ]; then
        err "$at: no record of the command it abbreviates: $full"
      elif [[ ! "${rec_how[j]}" =~ ^(run|fails|device|script|ci)$ ]]; then
        err "$at: the command it abbreviates ($manifest:${rec_line[j]}) is not exercised: run, fails, device, script or ci"
      elif ! msg=$(abbreviation_fits "$key" "$full"); then
        err "$at: $msg ($manifest:${rec_line[j]})"
      fi
      nabbrev=$((nabbrev + 1)) ;;
    source)
      if [ -z "$args" ]; then err "$at: write 'source FILE...'"; continue; fi
      for f in $args; do
        if [ ! -f "$f" ]; then err "$at: no such file: $f$hint"
        elif ! compiled "$f"; then err "$at: $f is not named in its package's BUILD, so nothing compiles it"
        fi
      done
      first=${rec_where[i]%% *}
      msg=$(block_in_sources "${rec_body[i]}" "$first" $args) || err "$msg"
      nsource=$((nsource + 1)) ;;
    sketch)
      [ -n "$args" ] || err "$at: say why it is a sketch: 'sketch REASON'"
      nsketch=$((nsketch + 1)) ;;
  esac
done

summary="$ncmd commands in code blocks and $ninline in inline code, $((${#run_list[@]} + ndevice + nscript + nci + nabbrev)) records: ${#run_list[@]} run here ($nslow only with --slow), $ndevice in device scripts, $nscript device scripts, $nci by CI, $nabbrev abbreviations of those; $ncpp C++ blocks ($nsource from compiled sources, $nsketch sketches)"
if [ $errors -gt 0 ]; then
  echo "check_docs: $errors problem(s); see docs/architecture.md (\"Docs stay true\") and $manifest" >&2
  exit 1
fi
echo "check_docs: all accounted for: $summary"
[ "$mode" = static ] && exit 0

# --- Run the CPU commands -----------------------------------------------------
# Each runs from the repository root; $DOCS_TMP is a private folder for `sub`.
# An mpirun gets it as TMPDIR too: Open MPI keeps its session folder there,
# and two jobs in one were seen to clash (tests/parallel/mpi_test.sh). Other
# commands keep TMPDIR: a Bazel server they start outlives this script.
logs=${DOCS_LOG_DIR:-$work/logs}
mkdir -p "$logs" "$work/tmp"
failed=0 ran=0 total_start=$(date +%s)
for i in "${run_list[@]}"; do
  key=${rec_key[i]} dirs=${rec_dirs[i]} at=${rec_where[i]%% *}
  [ -n "$only" ] && ! grep -qE -- "$only" <<< "$key" && continue
  # A slow record with `smoke` substitutions runs shortened here (a fuzz
  # run of seconds, one epoch) and as written under --slow; without any,
  # only --slow runs it.
  smoking=0
  if grep -q '^slow' <<< "$dirs" && [ $slow = 0 ]; then
    if ! grep -q '^smoke ' <<< "$dirs"; then
      echo "skip  (slow: tools/check_docs.sh --slow runs it)  $at  $key"
      continue
    fi
    smoking=1
  fi
  cmd=$key limit=600
  while IFS= read -r d; do
    case "$d" in
      'sub '*) old=${d#sub }; old=${old%% => *}; new=${d#* => }; new=${new//'$DOCS_TMP'/$work/tmp}
               cmd=${cmd//"$old"/"$new"} ;;
      'smoke '*) [ $smoking = 1 ] || continue
               old=${d#smoke }; old=${old%% => *}; new=${d#* => }; new=${new//'$DOCS_TMP'/$work/tmp}
               cmd=${cmd//"$old"/"$new"} ;;
      'timeout '*) limit=${d#timeout } ;;
    esac
  done <<< "$dirs"
  log=$logs/$(printf '%02d' "$i").log
  start=$(date +%s%N)
  tmp=${TMPDIR:-/tmp}
  [[ "$cmd" == *mpirun* ]] && tmp=$work/tmp
  TMPDIR=$tmp DOCS_TMP=$work/tmp timeout "$limit" bash -c "$cmd" > "$log" 2>&1 < /dev/null
  rc=$?
  secs=$(( ($(date +%s%N) - start) / 100000000 ))
  secs="$((secs / 10)).$((secs % 10))"
  problem=""
  if grep -q '^fails' <<< "$dirs"; then
    text=$(sed -n 's/^fails //p' <<< "$dirs")
    if [ $rc = 0 ]; then problem="exited 0, but the docs show it failing"
    elif [ $rc = 124 ]; then problem="still running after ${limit} s"
    elif ! grep -qF -- "$text" "$log"; then problem="failed without printing: $text"
    fi
  elif [ $rc = 124 ]; then problem="still running after ${limit} s"
  elif [ $rc != 0 ]; then problem="exited with status $rc"
  fi
  while IFS= read -r d; do
    [ -n "$problem" ] && break
    case "$d" in
      'expect '*) grep -qE -- "${d#expect }" "$log" || problem="no output line matches: ${d#expect }" ;;
      'reject '*) grep -qE -- "${d#reject }" "$log" && problem="an output line matches: ${d#reject }" ;;
      'last '*) grep -v '^[[:space:]]*$' "$log" | tail -n 1 | grep -qE -- "${d#last }" ||
                problem="its last line, '$(grep -v '^[[:space:]]*$' "$log" | tail -n 1)', does not match: ${d#last }" ;;
    esac
  done <<< "$dirs"
  ran=$((ran + 1))
  if [ -z "$problem" ]; then
    if [ $smoking = 1 ]; then
      printf 'ok    %6s s  %s  %s\n      (smoke: %s)\n' "$secs" "$at" "$key" "$cmd"
    else
      printf 'ok    %6s s  %s  %s\n' "$secs" "$at" "$key"
    fi
  else
    failed=$((failed + 1))
    printf 'FAIL  %6s s  %s  %s\n      %s\n' "$secs" "$at" "$key" "$problem"
    [ "$cmd" != "$key" ] && echo "      as run: $cmd"
    tail -n 15 "$log" | sed 's/^/      | /'
  fi
done
echo "check_docs: ran $ran commands in $(( $(date +%s) - total_start )) s: $((ran - failed)) passed, $failed failed"
[ $failed = 0 ]
