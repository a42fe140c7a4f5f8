"""The orchestrator's REST API (`cobalt orchestrator serve`): thin routes over the services."""
