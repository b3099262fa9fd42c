from vtbench.cli import main

main()
