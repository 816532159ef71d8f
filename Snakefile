# CASHG pipeline: table of contents.
# The stages are defined once, in dvc.yaml; workflow/dvc_stages.smk turns each into a rule.
# Run everything:  snakemake --cores all        (or: dvc repro)
# Parameters:      params.yaml                  (dataset choice, raw-data roots, every stage)

configfile: "params.yaml"


include: "workflow/dvc_stages.smk"


rule all:
    default_target: True
    input:
        all_stage_outputs(),


onsuccess:
    record_in_dvc_lock()
