"""The auditor's side: bundle, verify (recompute everything), rules (engine + named predicates), system description."""
