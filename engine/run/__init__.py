"""Running a scenario: the runner and each level's run (`runner`, `level_run`), the nemesis
that fires the faults, the watches of replicas, the progress a page shows, the run record in
runs/RUN_ID (`record`, its only owner), recovery of interrupted runs, and Free play.
"""
