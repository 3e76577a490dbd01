package unitfile

import (
	"fmt"
	"strconv"
	"strings"
)

// SplitWords splits a setting value into words like systemd's
// extract_first_word(EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE): whitespace
// separates, single and double quotes group, C escapes are decoded.
func SplitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == '\\':
			if i+1 >= len(rs) {
				cur.WriteRune(r)
				inWord = true
				continue
			}
			dec, n := unescape(rs[i+1:])
			cur.WriteString(dec)
			i += n
			inWord = true
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '"' || r == '\'':
			quote = r
			inWord = true
		case r == ' ' || r == '\t' || r == '\n' || r == '\r':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote in %q", quote, s)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// unescape decodes one C escape whose backslash precedes rs, returning the
// text and how many runes of rs it used. Unknown escapes keep the character,
// as systemd's relaxed mode does.
func unescape(rs []rune) (string, int) {
	switch rs[0] {
	case 'a':
		return "\a", 1
	case 'b':
		return "\b", 1
	case 'f':
		return "\f", 1
	case 'n':
		return "\n", 1
	case 'r':
		return "\r", 1
	case 't':
		return "\t", 1
	case 'v':
		return "\v", 1
	case 's':
		return " ", 1
	case 'x':
		if len(rs) >= 3 {
			if v, err := strconv.ParseUint(string(rs[1:3]), 16, 8); err == nil {
				return string([]byte{byte(v)}), 3
			}
		}
	case '0', '1', '2', '3':
		if len(rs) >= 3 {
			if v, err := strconv.ParseUint(string(rs[0:3]), 8, 8); err == nil {
				return string([]byte{byte(v)}), 3
			}
		}
	}
	return string(rs[0]), 1
}
