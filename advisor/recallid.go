package advisor

import (
	"crypto/sha256"
	"encoding/hex"
)

// Recall id shape: RecallIDPrefix followed by RecallIDHexDigits lowercase hex digits,
// RecallIDLen bytes in all (e.g. "o_7f3a9c01b2").
const (
	RecallIDPrefix    = "o_"
	RecallIDHexDigits = 10 // 40 bits: a collision needs ~10^6 outputs in one store
	RecallIDLen       = len(RecallIDPrefix) + RecallIDHexDigits
)

// RecallID returns the recall id of the output outputKey (transcript.ToolOutput.Key)
// of session sessionID: "o_" followed by the first 10 hex digits of
// SHA-256(sessionID + "\x00" + outputKey). The NUL separator keeps ("ab","c") and
// ("a","bc") apart. It is deterministic, so a stub quoting it is byte-stable across
// steps and processes (DESIGN.md step 6, "an applied stub is frozen").
func RecallID(sessionID, outputKey string) string {
	sum := sha256.Sum256([]byte(sessionID + "\x00" + outputKey))
	return RecallIDPrefix + hex.EncodeToString(sum[:])[:RecallIDHexDigits]
}

// ValidRecallID reports whether id has the shape RecallID produces: "o_" and exactly
// 10 lowercase hex digits. It does not say whether any store holds the id.
func ValidRecallID(id string) bool {
	if len(id) != RecallIDLen || id[:len(RecallIDPrefix)] != RecallIDPrefix {
		return false
	}
	for i := len(RecallIDPrefix); i < len(id); i++ {
		c := id[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
