package advisor

import "testing"

// Want values computed independently with python3:
// "o_" + hashlib.sha256((s + "\x00" + k).encode()).hexdigest()[:10].
func TestRecallID(t *testing.T) {
	tests := []struct {
		session, key, want string
	}{
		{"sess-1", "toolu_01", "o_9314b40473"},
		{"a", "bc", "o_40bb547d93"},
		{"ab", "c", "o_6c032e631d"}, // the NUL separator keeps it apart from ("a","bc")
		{"", "", "o_6e340b9cff"},
	}
	for _, tt := range tests {
		got := RecallID(tt.session, tt.key)
		if got != tt.want {
			t.Errorf("RecallID(%q, %q) = %q, want %q", tt.session, tt.key, got, tt.want)
		}
		if !ValidRecallID(got) {
			t.Errorf("ValidRecallID(%q) = false for RecallID's own output", got)
		}
	}
}

func TestValidRecallID(t *testing.T) {
	tests := []struct {
		id   string
		want bool
	}{
		{"o_0123456789", true},
		{"o_abcdefabcd", true},
		{"o_ABCDEFABCD", false}, // upper case hex is not what RecallID produces
		{"o_012345678", false},  // 9 digits
		{"o_01234567890", false},
		{"x_0123456789", false},
		{"o_01234567g9", false},
		{"", false},
		{" o_0123456789", false},
	}
	for _, tt := range tests {
		if got := ValidRecallID(tt.id); got != tt.want {
			t.Errorf("ValidRecallID(%q) = %v, want %v", tt.id, got, tt.want)
		}
	}
}

// Want values computed independently with python3:
// "o_" + hmac.new(secret, (s + "\x00" + k).encode(), hashlib.sha256).hexdigest()[:10].
func TestKeyedRecallID(t *testing.T) {
	seq := make([]byte, 32)
	for i := range seq {
		seq[i] = byte(i)
	}
	tests := []struct {
		secret       []byte
		session, key string
		want         string
	}{
		{[]byte("kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"), "sess-1", "toolu_01", "o_6d62e9b31d"},
		{seq, "a", "bc", "o_2f578f8064"},
		{seq, "ab", "c", "o_6382fdbdc3"},
		{nil, "sess-1", "toolu_01", "o_9314b40473"}, // no secret: the unkeyed RecallID
	}
	for _, tt := range tests {
		got := KeyedRecallID(tt.secret, tt.session, tt.key)
		if got != tt.want {
			t.Errorf("KeyedRecallID(%x, %q, %q) = %q, want %q", tt.secret, tt.session, tt.key, got, tt.want)
		}
		if !ValidRecallID(got) {
			t.Errorf("ValidRecallID(%q) = false for KeyedRecallID's own output", got)
		}
	}
}
