package paths

import "testing"

func TestNormalize(t *testing.T) {
	tests := []struct{ p, cwd, want string }{
		{"C:\\Users\\x\\a.py", "", "/c/Users/x/a.py"},
		{"C:/Users/x/a.py", "", "/c/Users/x/a.py"},
		{"/c/Users/x/a.py", "", "/c/Users/x/a.py"},
		{"/C/Users/x/a.py", "", "/c/Users/x/a.py"},
		{"c:\\Users\\x\\..\\x\\a.py", "", "/c/Users/x/a.py"},
		{"/cygdrive/c/Users/x/a.py", "", "/c/Users/x/a.py"},
		{"/mnt/c/Users/x/a.py", "", "/c/Users/x/a.py"},
		{"a.py", "C:\\Users\\x", "/c/Users/x/a.py"},
		{"./src/../a.py", "/r", "/r/a.py"},
		{".\\src\\a.py", "/r", "/r/src/a.py"},
		{"../b/a.py", "/r/x", "/r/b/a.py"},
		{"src/a.py", "", "src/a.py"},
		{"./a.py", "", "a.py"},
		{`"/r/a b.py"`, "", "/r/a b.py"},
		{"~/x/a.py", "/r", "~/x/a.py"},
		{"/r/dir/", "", "/r/dir"},
		{"  ", "/r", ""},
		{"/mnt/data/x", "", "/mnt/data/x"},
	}
	for _, tt := range tests {
		if got := Normalize(tt.p, tt.cwd); got != tt.want {
			t.Errorf("Normalize(%q, %q) = %q, want %q", tt.p, tt.cwd, got, tt.want)
		}
	}
}
