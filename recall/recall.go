// Package recall gets a pruned output's original back by its recall id (DESIGN.md
// "Recall") and records the recall as later-use evidence.
package recall
