from conformance.strategies import profiles

profiles.register()
