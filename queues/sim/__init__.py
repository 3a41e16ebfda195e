"""queues.sim is test/demo/what-if infrastructure that product code never imports."""
