"""Pure runtime logic: workflows, hooks, replay, protocol; no redis, no rq."""
