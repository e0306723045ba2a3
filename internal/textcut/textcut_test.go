package textcut

import "testing"

func TestCuts(t *testing.T) {
	for _, tt := range []struct {
		name, got, want string
	}{
		{"Bytes short", Bytes("abc", 3), "abc"},
		{"Bytes cut", Bytes("abcdef", 4), "abcd"},
		{"Bytes splits a rune", Bytes("aé", 2), "a\xc3"},
		{"BytesDots short", BytesDots("abc", 3), "abc"},
		{"BytesDots cut", BytesDots("abcdef", 4), "abcd..."},
		{"BytesOnRune short", BytesOnRune("aé", 3), "aé"},
		{"BytesOnRune backs off", BytesOnRune("aé", 2), "a"},
		{"BytesOnRune on a boundary", BytesOnRune("aéb", 3), "aé"},
		{"BytesOnRune to nothing", BytesOnRune("日本", 2), ""},
		{"BytesOnRune keeps invalid bytes", BytesOnRune("a\xffb", 2), "a\xff"},
		{"RunesEllipsis short", RunesEllipsis("日本語", 3), "日本語"},
		{"RunesEllipsis cut", RunesEllipsis("日本語です", 3), "日本…"},
		{"RunesEllipsis invalid byte", RunesEllipsis("\xffabc", 3), "\uFFFDa…"},
	} {
		if tt.got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}
