from rdmadoctor.cli import run

run()
