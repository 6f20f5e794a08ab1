from rdmadoctor.cli import main

main()
