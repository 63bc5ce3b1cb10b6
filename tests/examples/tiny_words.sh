# Sourced by the char_lm tests: write_tiny_words FILE writes 650 made-up
# words ("ban", "baning", ...), enough for a tiny model to learn something
# in a few steps.
write_tiny_words() {
  local a b c
  for a in b c d f g h l m n p r s t; do
    for b in a e i o u; do
      for c in n r s t ''; do echo "$a$b$c"; echo "$a$b${c}ing"; done
    done
  done >"$1"
}
