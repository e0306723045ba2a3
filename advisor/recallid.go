package advisor

import (
	"crypto/hmac"
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

// RecallID returns the unkeyed recall id of the output outputKey
// (transcript.ToolOutput.Key) of session sessionID: "o_" followed by the first 10 hex
// digits of SHA-256(sessionID + "\x00" + outputKey). The NUL separator keeps
// ("ab","c") and ("a","bc") apart. It is deterministic, so a stub quoting it is
// byte-stable across steps and processes (docs/DESIGN.md step 6, "an applied stub is
// frozen"). Anyone who knows the session id and the call id can compute it: an
// Advisor with a RecallSecret uses KeyedRecallID instead; ids made here stay valid
// (the store looks originals up by the id itself).
func RecallID(sessionID, outputKey string) string {
	sum := sha256.Sum256([]byte(sessionID + "\x00" + outputKey))
	return RecallIDPrefix + hex.EncodeToString(sum[:])[:RecallIDHexDigits]
}

// KeyedRecallID returns the recall id of output outputKey of session sessionID keyed
// with secret: "o_" followed by the first 10 hex digits of
// HMAC-SHA256(secret, sessionID + "\x00" + outputKey) (RFC 2104). Without the secret
// the id cannot be derived from the session and call ids, which a client, a log or a
// transcript may show; it can only be read from the stub. An empty secret gives
// RecallID (the unkeyed ids of stores made before secrets existed).
func KeyedRecallID(secret []byte, sessionID, outputKey string) string {
	if len(secret) == 0 {
		return RecallID(sessionID, outputKey)
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(sessionID + "\x00" + outputKey))
	return RecallIDPrefix + hex.EncodeToString(mac.Sum(nil))[:RecallIDHexDigits]
}

// recallID is the recall id of output key in st: the id of the stub already stored
// for it (a stub is frozen, and a store made before Advisor.RecallSecret was set
// holds unkeyed ids), else KeyedRecallID with a.RecallSecret.
func (a *Advisor) recallID(st *state, key string) string {
	if s, ok := st.frozen[key]; ok && ValidRecallID(s.RecallID) {
		return s.RecallID
	}
	return KeyedRecallID(a.RecallSecret, st.id, key)
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
