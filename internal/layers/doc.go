// Package layers holds no code: its tests check the layering of the module
// (docs/ARCHITECTURE.md "Layers"). TestDomainImports runs `go list -deps` on the
// domain packages and fails on net/http, a model client, plotting, or storage
// imported by a domain package; TestReplayOnlyReplays fails when replay depends on
// calibrate or tuning; TestPerStepFunctionLength parses the packages on the
// per-step path and fails listing every function over 60 lines.
package layers
