# Sourced by the gpt example's tests: write_tiny_fortunes DIR writes a small
# fortune-style corpus there (about 24 KB in 3 files, sayings separated by
# "%" lines, drawn by a fixed LCG so every run writes the same bytes), plus
# what the corpus loader must skip: a .dat index, a .u8 symbolic link and a
# subfolder.
write_tiny_fortunes() {
  local dir=$1
  mkdir -p "$dir/sub"
  local f
  for f in 1 2 3; do
    awk -v seed="$f" 'BEGIN {
      split("the a one every no my your", det, " ")
      split("cat dog program bug fortune cookie user kernel", noun, " ")
      split("eats finds writes breaks reads loves", verb, " ")
      split("small old lazy quick odd", adj, " ")
      s = seed * 7919
      for (i = 0; i < 160; ++i) {
        line = ""
        for (k = 0; k < 2; ++k) {
          s = (s * 1103515245 + 12345) % 2147483648; d1 = int(s / 65536) % 7 + 1
          s = (s * 1103515245 + 12345) % 2147483648; a = int(s / 65536) % 5 + 1
          s = (s * 1103515245 + 12345) % 2147483648; n1 = int(s / 65536) % 8 + 1
          s = (s * 1103515245 + 12345) % 2147483648; v = int(s / 65536) % 6 + 1
          s = (s * 1103515245 + 12345) % 2147483648; n2 = int(s / 65536) % 8 + 1
          line = line det[d1] " " adj[a] " " noun[n1] " " verb[v] " the " noun[n2] ". "
        }
        print line
        print "%"
      }
    }' >"$dir/sayings$f"
  done
  printf '\x00\x01\x02binary index\xff' >"$dir/sayings1.dat"
  ln -sf sayings1 "$dir/sayings1.u8"
  echo "not read: in a subfolder" >"$dir/sub/other"
}
